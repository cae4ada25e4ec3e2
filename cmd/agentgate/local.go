package main

import (
	_ "embed"
	"os"
	"path/filepath"
)

// demoScript is the scripted model the demo and a default `serve` use: read,
// propose a write, finish.
//
//go:embed demo_script.json
var demoScript []byte

// demoDocuments seed the local document store.
var demoDocuments = map[string]string{
	"pages/pricing.md": "# Pricing\n\n- Starter: free\n- Team: 10 EUR per user and month\n- Enterprise: ask us\n",
	"pages/about.md":   "# About us\n\nWe build tools that ask before they act.\n",
}

// seedDocuments writes the demo documents that do not exist yet.
func seedDocuments(dir string) error {
	for name, text := range demoDocuments {
		path := filepath.Join(dir, "content", filepath.FromSlash(name))
		if _, err := os.Stat(path); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			return err
		}
	}
	return nil
}
