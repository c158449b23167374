package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/leasefence/lab/harness"
)

// Exit codes. They are the command's contract with scripts and CI.
const (
	exitOK          = 0   // the fenced mode held its invariants; every fixture passed
	exitFailed      = 1   // the fenced mode broke an invariant (a library bug), or a fixture failed
	exitUsage       = 2   // bad input: a flag, a scenario name, a file
	exitInterrupted = 130 // stopped by Ctrl-C; what it had was printed
)

// app is the command, with everything it touches from outside passed in,
// so that tests drive it end to end without a terminal.
type app struct {
	stdout, stderr io.Writer
	// stdoutTTY decides between the dashboard and the plain report;
	// stderrTTY decides whether progress is drawn.
	stdoutTTY, stderrTTY bool
	// dashboard shows a paced run; it is the tui package in the real
	// command.
	dashboard func(ctx context.Context, live *harness.Live) error
	// afterRun, when set, sees every finished result before it is
	// reported. Only tests set it: to simulate the fenced mode breaking an
	// invariant, which a correct library never does.
	afterRun func(*harness.Result)
}

// command is one subcommand.
type command struct {
	name, args, summary string
	run                 func(a *app, ctx context.Context, args []string) int
}

func commands() []command {
	return []command{
		{"watch", "[scenario|file] [flags]", "the live dashboard, naive and fenced side by side (the default command)", (*app).watch},
		{"run", "[scenario|file] [flags]", "one headless run: a report per mode, or JSON, or an HTML page", (*app).runCmd},
		{"swarm", "[scenario|file] --seeds N [flags]", "many seeds with fault knobs drawn per seed, on all cores", (*app).swarm},
		{"check", "PATH [--json]", "judge a history file (lab run --events) again: the same report", (*app).check},
		{"fixtures", "[dir] [--junit PATH] [-v]", "run every fixture file of a directory, as tests", (*app).fixtures},
		{"scenarios", "", "list the built-in scenarios", (*app).scenarios},
	}
}

func (a *app) main(ctx context.Context, args []string) int {
	if len(args) == 0 {
		return a.watch(ctx, nil)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			return a.main(ctx, []string{args[1], "--help"})
		}
		a.usage(a.stderr)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(a, ctx, args[1:])
		}
	}
	if strings.HasPrefix(args[0], "-") {
		// Flags with no subcommand belong to the default one: `lab --speed 5`.
		return a.watch(ctx, args)
	}
	fmt.Fprintf(a.stderr, "lab: unknown command %q\n\n", args[0])
	a.usage(a.stderr)
	return exitUsage
}

func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `lab: a laboratory for leases with fencing tokens.

Usage:
  lab [command] [arguments]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
With no command, lab runs "watch" on the default scenario (`+harness.DefaultScenario+`).
Run "lab <command> --help" for a command's flags. Exit status: 0 when the
fenced mode held its invariants (and every fixture passed), 1 when it did
not (a bug in the library) or a fixture failed, 2 for bad input, 130 when
interrupted.
`)
}

// newFlagSet makes a subcommand's flag set, with a usage that says what
// the subcommand does before its flags.
func (a *app) newFlagSet(name, args, about string) *flag.FlagSet {
	fs := flag.NewFlagSet("lab "+name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		fmt.Fprintf(a.stderr, "Usage: lab %s %s\n\n%s\n\nFlags:\n", name, args, strings.TrimSpace(about))
		printFlags(a.stderr, fs)
	}
	return fs
}

// printFlags is flag.PrintDefaults, except that a knob flag shows its
// metavariable (DIST, MIN:MAX, ...) rather than a type.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		metavar, usage := flag.UnquoteUsage(f)
		if kv, ok := f.Value.(*knobValue); ok {
			metavar = kv.k.metavar
		}
		line := "  -" + f.Name
		if metavar != "" {
			line += " " + metavar
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			usage += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
	})
}

// parseArgs parses flags and positional arguments in any order (`lab run
// gap --seed 3` and `lab run --seed 3 gap` are the same), and returns the
// positional ones. Everything after "--" is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagExit turns a flag-parsing error into an exit code: --help is a
// success, anything else bad input (the flag package has already said
// what was wrong, and printed the usage).
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// badInput reports bad input and returns exitUsage.
func (a *app) badInput(cmd string, err error) int {
	for _, line := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		fmt.Fprintf(a.stderr, "lab %s: %s\n", cmd, line)
	}
	return exitUsage
}
