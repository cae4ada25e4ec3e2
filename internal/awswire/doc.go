// Package awswire builds agentgate's adapters on AWS from the typed
// configuration: the run store on DynamoDB and S3, approval mail through SES
// v2, async dispatch through Lambda, the webhook signing secrets in Secrets
// Manager. internal/app builds the whole application from them; the purge
// function is wired here alone (Purge), so that its binary links the sweep
// and what it needs (expiry, reminders and mail, re-dispatch, webhook
// delivery, retention) but no model, tools, HTTP API or approval pages.
package awswire
