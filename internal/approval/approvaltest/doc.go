// Package approvaltest reads approval mails back from a moto server (its
// SES model data) for the integration tests of the packages that send them:
// SentMail lists what was sent, ParseEML decodes one message and ExtractLink
// finds the approval link in it.
package approvaltest
