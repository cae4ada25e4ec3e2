// Command resume is the agentgate resume Lambda function. It only wires: the
// environment, one AWS configuration, the model (provider.FromEnv) and the
// adapters are read and built once, outside the handler.
package main
