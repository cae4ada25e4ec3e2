package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand of the agentgate binary.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout io.Writer) error
}

// commands holds every subcommand by name; files register into it from init.
var commands = map[string]command{}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cliStderr = stderr
	if len(args) == 0 {
		usage(stderr)
		return 2 // a usage error, as for an unknown command
	}
	switch args[0] {
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	case "version", "--version":
		fmt.Fprintf(stdout, "agentgate %s\n", version())
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "agentgate: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(ctx, args[1:], stdout); errors.Is(err, flag.ErrHelp) {
		return 0 // -h: the flag package printed the usage
	} else if err != nil {
		if errors.As(err, new(jsonFailure)) {
			writeJSONError(stderr, err) // JSON escapes what a caller sent
			return 1
		}
		// An API error's message may quote what a caller sent.
		fmt.Fprintf(stderr, "agentgate %s: %s\n", args[0], terminalText(err.Error()))
		return 1
	}
	return 0
}

// version is the build's version: the main module's version (a tagged
// `go install ...@v1.2.3`) and the VCS revision it was built from, when
// the build recorded them; "devel" otherwise.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if rev != "" && !strings.Contains(v, rev[:min(12, len(rev))]) {
		v += " (" + rev + modified + ")"
	}
	return v
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: agentgate <command> [flags]  (agentgate --version prints the version)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
}
