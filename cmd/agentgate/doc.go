// Command agentgate is the local binary of agentgate: it runs the scripted
// demo, serves the API locally on the embedded store, and prepares emulator
// resources. Each subcommand lives in its own file and registers itself in
// commands from an init function.
package main
