package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
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
	args, err := hoistGlobalFlags(args)
	if err != nil {
		fmt.Fprintf(stderr, "agentgate: %s\n\n", terminalText(err.Error()))
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "--help": // after global flags, which it ignores
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
	err = cmd.run(ctx, args[1:], stdout)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0 // -h: the flag package printed the usage
	}
	code := 1
	var usageErr *usageError
	if errors.As(err, &usageErr) {
		code = 2
	}
	if errors.As(err, new(jsonFailure)) {
		writeJSONError(stderr, err) // JSON escapes what a caller sent
		return code
	}
	// An API error's message may quote what a caller sent.
	fmt.Fprintf(stderr, "agentgate %s: %s\n", args[0], terminalText(err.Error()))
	switch {
	case usageErr != nil && usageErr.usage != "":
		fmt.Fprintf(stderr, "\n%s", terminalText(usageErr.usage))
	case usageErr != nil:
		fmt.Fprintf(stderr, "usage: agentgate %s -h lists its flags\n", args[0])
	}
	return code
}

// hoistGlobalFlags moves the flags every API command takes (--endpoint,
// --token, --region, --json), when they come before the command, to after
// the command and its verb, where the command parses them: `agentgate
// --json runs get ID` is `agentgate runs get --json ID`. Before the
// command, --version and -h/--help are what they are as the first
// argument (args comes back as just that flag). It is an error, saying
// what is wrong, when the flags before the command leave no command, when
// one of them lacks its value and when one is none of these. Args with --
// before the command come back as they are, for run to refuse as an
// unknown command; a command that does not take a hoisted flag refuses
// it as any flag it does not have.
func hoistGlobalFlags(args []string) ([]string, error) {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return args, nil
	}
	fs := flag.NewFlagSet("agentgate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	new(globalFlags).register(fs)
	showVersion := fs.Bool("version", false, "print the version")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return []string{"--help"}, nil
	case err != nil:
		return nil, err // the flag package names the flag: "flag needs an argument: -token"
	case *showVersion:
		return []string{"--version"}, nil
	case fs.NArg() == 0:
		return nil, errors.New("no command given: flags before a command go to it, as in agentgate --json runs get ID")
	}
	rest := fs.Args()
	leading := args[:len(args)-len(rest)]
	if slices.Contains(leading, "--") {
		return args, nil
	}
	out := []string{rest[0]}
	after := rest[1:]
	if len(after) > 0 && !strings.HasPrefix(after[0], "-") {
		out, after = append(out, after[0]), after[1:] // the verb of a command group
	}
	out = append(out, leading...)
	return append(out, after...), nil
}

// usageError is a command line the command cannot run: no subcommand or
// an unknown one, a flag it does not have or a value it cannot take, a
// missing or extra argument, flags that do not go together. run exits 2
// for it (1 is for a command that ran and failed) and prints usage, when
// set, after the message.
type usageError struct {
	err   error
	usage string
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError with the message format gives.
func usagef(format string, a ...any) error {
	return &usageError{err: fmt.Errorf(format, a...)}
}

// parseFlags parses args into fs: -h prints the usage on stdout and is
// flag.ErrHelp; any other error is a usageError that carries the usage
// (run prints both on stderr); positional arguments are refused unless the
// command takes them (positional).
func parseFlags(fs *flag.FlagSet, args []string, positional bool, stdout io.Writer) error {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = io.Copy(stdout, &out)
		return err
	case err != nil:
		out.Reset()
		fs.Usage()
		return &usageError{err: err, usage: out.String()}
	case !positional && fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	}
	return nil
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
