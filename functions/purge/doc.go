// Command purge is the agentgate purge Lambda function: the scheduled sweep.
// It only wires: the environment, one AWS configuration and the sweep's
// adapters are read and built once, outside the handler, in awswire.Purge,
// which links no model, tools, HTTP API or approval pages.
package main
