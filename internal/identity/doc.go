// Package identity says who someone is: one Principal type for every way a
// caller or approver is named (e-mail address, IAM ARN, local bearer name),
// each with a canonical comparison form, and a Directory that maps those
// aliases to persons, groups of persons and service accounts.
//
// Comparisons that guard approvals never compare strings as given. Without
// a directory entry two principals are the same when their keys are equal
// (e-mail: domain and local part case-insensitive, "+tag" ignored; IAM: an
// assumed-role session is its role, names case-insensitive as IAM treats
// them, paths ignored). With a directory, every alias of a person is that
// person. Four-eyes and quorums count persons (Subject.Key), never strings.
//
// MayDecide is the identity half of "may this principal decide this call":
// service accounts never decide, the decider must be one of the call's
// approvers (directly or through a group), must pass the approver tool
// gate, and under four-eyes must not be the initiator's person. Every
// failure, including an approver list that no longer resolves, refuses.
package identity
