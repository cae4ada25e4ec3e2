// Package awscall sends the few AWS calls the functions make outside
// DynamoDB, S3 and the model (an asynchronous Lambda invoke, an SES mail
// through SES v2 or, where only it is served, SES's first API) as plain
// HTTPS requests signed with aws-sdk-go-v2's own SigV4 signer
// (aws/signer/v4), over the SDK's default HTTP client, with the SDK's retry
// back-off.
//
// Each generated service client links its whole service model: the Lambda
// client costs a function 0.69 MB and SES v2 0.56 MB, and their package
// initialization runs at every cold start, for one operation each (issue
// #15: the workers must stay within twice an aws-lambda-go hello-world).
// A call here is a method, a path, headers and a body (JSON, or a form for
// the Query protocol); the endpoint is the one the SDK's client would use
// (AWS_ENDPOINT_URL_<SERVICE>, then AWS_ENDPOINT_URL, then the service's
// regional endpoint), and an error answer (JSON or XML) is an *APIError
// that satisfies smithy.APIError, as the SDK's are.
package awscall
