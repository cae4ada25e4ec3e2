// Command soak runs agentgate's crash soak (package internal/soak) against
// a built agentgate binary: many concurrent clients, SIGKILLs of the server
// at random moments, then the invariants. It exits 1 when one is broken.
// scripts/soak.sh (make soak) builds the binaries and runs it.
package main
