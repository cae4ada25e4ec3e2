// Package approvaltest reads approval mails back from an AWS emulator for
// the integration tests of the packages that send them: SentMail lists what
// moto (its SES model data) or LocalStack (its /_aws/ses endpoint) accepted,
// ParseEML decodes one message, ExtractLink finds the approval link in it,
// and ServesSESv2 says whether the emulator has SES v2 at all (LocalStack
// Community has SES v1 only).
package approvaltest
