package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/agentgate/agentgate/internal/soak"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	bin := fs.String("bin", "bin/agentgate", "the agentgate binary")
	dir := fs.String("dir", "", "a fresh folder for the server's store, logs and the report (default: a new temporary folder)")
	dur := fs.Duration("duration", 120*time.Second, "how long clients start runs and kills happen")
	kills := fs.Int("kills", -1, "SIGKILLs in the duration (default: one per 5 s)")
	clients := fs.Int("clients", 8, "concurrent clients")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the mix of modes and the kill schedule") //nolint:gosec // a seed
	sweep := fs.Duration("sweep-every", time.Second, "serve --sweep-every")
	settle := fs.Duration("settle", 0, "longest wait after the last kill for runs to end or wait (default: lease + 5 sweeps + 30 s)")
	store := fs.String("store", "embedded", "embedded, or aws (AGENTGATE_TABLE, AGENTGATE_BUCKET and AWS_ENDPOINT_URL from the environment)")
	serveArgs := fs.String("serve-args", "", "more serve flags, space-separated")
	results := fs.String("results", "", "append one line of figures to this markdown table (tools/soak/results.md in make soak)")
	commit := fs.String("commit", "", "the commit the soak measures, for --results")
	raw := fs.Bool("raw-emulator", false, "with --store aws: let DynamoDB requests reach the emulator concurrently (moto then breaks transactions; see internal/soak)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *kills < 0 {
		*kills = int(*dur / (5 * time.Second))
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "agentgate-soak-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			return 1
		}
		*dir = d
	}
	res, err := soak.Run(ctx, soak.Config{
		Bin: *bin, Dir: *dir, Duration: *dur, Kills: *kills, Clients: *clients, Seed: *seed,
		Sweep: *sweep, Settle: *settle, Store: *store, RawEmulator: *raw, ServeArgs: strings.Fields(*serveArgs), Log: os.Stdout,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 1
	}
	soak.Print(os.Stdout, res)
	fmt.Printf("logs, runs.json, executions.json and report.json: %s\n", *dir)
	if *results != "" {
		if err := soak.AppendResult(*results, res, *commit, time.Now()); err != nil {
			fmt.Fprintln(os.Stderr, "soak: results:", err)
			return 1
		}
		fmt.Printf("figures appended to %s\n", *results)
	}
	if len(res.Report.Failed()) > 0 {
		return 1
	}
	return 0
}
