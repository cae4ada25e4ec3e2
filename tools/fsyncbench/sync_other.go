//go:build !linux

package main

import "os"

// fdatasync is f.Sync where bbolt uses it (fsync, or F_FULLFSYNC on macOS
// when bbolt is told to).
func fdatasync(f *os.File) error { return f.Sync() }
