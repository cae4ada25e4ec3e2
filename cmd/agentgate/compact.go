package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/agentgate/agentgate/internal/app"
	"github.com/agentgate/agentgate/internal/runs/embedded"
)

func init() {
	commands["compact"] = command{
		summary: "rewrite the embedded store's file without its freed pages, where purged runs' data stays until reused (stop serve first)",
		run:     runCompact,
	}
}

func runCompact(_ context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("compact", flag.ContinueOnError)
	dir := fs.String("dir", ".agentgate", "the folder serve keeps its embedded store in (its --dir)")
	if err := parseFlags(fs, args, false, stdout); err != nil {
		return err
	}
	path := filepath.Join(*dir, app.LocalStoreFile)
	res, err := embedded.Compact(path)
	if errors.Is(err, embedded.ErrInUse) {
		return fmt.Errorf("%w: stop the agentgate (serve or demo) running on --dir %s first", err, *dir)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "compacted %s: %d bytes before, %d after (freed pages, and what purged runs left in them, are not in the new file)\n", path, res.Before, res.After)
	return nil
}
