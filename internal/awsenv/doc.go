// Package awsenv builds the AWS SDK configuration of a Lambda function from
// its environment alone: the region, the function role's credentials that
// Lambda puts in the environment, and the endpoint variables of an emulator.
//
// It replaces config.LoadDefaultConfig in the functions. The default chain
// reads shared config and credential files and can get credentials from SSO,
// STS web identity, a process, ECS or EC2 instance metadata; a Lambda uses
// none of them, and linking them costs every function about 1.8 MB and
// their initialization at each cold start. The local binary and the client
// keep the default chain (profiles, SSO).
package awsenv
