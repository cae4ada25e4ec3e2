// Package approval issues approval-link tokens and sends the approval
// e-mails that carry them.
//
// A token is 256 bits from crypto/rand, handed out once in a link
// ({base}/approvals/{raw}) and stored only as its SHA-256 hash (see
// runs.ApprovalToken). Compose turns a Message (what the run is for, the
// pending calls with their previews, the deadline and the link) into a
// subject, a plain-text part and an HTML part; every value in the HTML is
// escaped, because tool arguments and previews are text the model wrote.
//
// Two Mailers deliver: SESMailer through Amazon SES (SES v2 by default, or
// SES's first API, SESv1, for an emulator without SES v2 such as LocalStack
// Community), and OutboxMailer, which writes .eml files into a folder and
// prints the link, for the local binary. Package approvaltest reads mails
// back from moto or LocalStack for integration tests.
//
// The link is the only secret: nothing here logs it.
package approval
