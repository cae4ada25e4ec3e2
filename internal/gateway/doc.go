// Package gateway is the local stand-in for API Gateway (REST API, Lambda
// proxy integration, v1 payload): it turns HTTP requests into
// events.APIGatewayProxyRequest, authenticates /runs callers with bearer
// tokens (the local equivalent of AWS_IAM), calls the same handler functions
// the Lambdas run — in process, or a real bootstrap binary under the Lambda
// Runtime Interface Emulator — and turns the proxy response back into HTTP.
package gateway
