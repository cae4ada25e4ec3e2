package main

import (
	_ "embed"
)

// demoScript is the scripted model the demo and a default `serve` use: read,
// propose a write, finish.
//
//go:embed demo_script.json
var demoScript []byte

// demoDocuments are the pages the demo script reads and writes: a new
// embedded store starts with them when its model is the demo script (see
// demoSeed), and never gets them back later.
var demoDocuments = map[string]string{
	"pages/pricing.md": "# Pricing\n\n- Starter: free\n- Team: 10 EUR per user and month\n- Enterprise: ask us\n",
	"pages/about.md":   "# About us\n\nWe build tools that ask before they act.\n",
}

// demoSeed is what a new embedded store's documents start with for model
// (a --model spec): the demo documents for the built-in demo script (""),
// which reads them, and nothing for any other model, whose documents are
// the user's own.
func demoSeed(model string) map[string]string {
	if model != "" {
		return nil
	}
	return demoDocuments
}
