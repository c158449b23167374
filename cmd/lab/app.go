package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
	"github.com/leasefence/lab/tui"
)

// Exit codes. They are the command's contract with scripts and CI.
const (
	exitOK          = 0   // nothing broke (held, or inconclusive); every fixture passed
	exitFailed      = 1   // the fenced mode broke an invariant (a library bug) or made no write (vacuous), or a fixture failed
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
	dashboard func(ctx context.Context, live tui.Source) error
	// afterRun, when set, sees every finished result before it is
	// reported. Only tests set it: to simulate the fenced mode breaking an
	// invariant, which a correct library never does.
	afterRun func(*history.Result)
	// onSetup, when set, sees a real-time run's setup before its runner
	// is made. Only tests set it: to put a lock that never returns in a
	// run, which no lock the lab offers does.
	onSetup func(*realtime.Setup)
	// closeLimit, when set, is how long a real-time run's close may take
	// after a call that never returned (closeAfterStuck when unset). Only
	// tests set it: to see lab run exit without waiting long.
	closeLimit time.Duration
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
		{"check", "PATH [--json] [--html PATH]", "judge a history file (lab run --events) again: the same report", (*app).check},
		{"fixtures", "[dir] [--junit PATH] [-v]", "run every fixture file of a directory, as tests", (*app).fixtures},
		{"scenarios", "", "list the built-in scenarios", (*app).scenarios},
		{"contenders", "", "list the contenders: the locks a run compares", (*app).contenders},
	}
}

func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}

func (a *app) main(ctx context.Context, args []string) int {
	// Whatever a scenario, fixture or history file holds reaches the
	// terminal as text: its control characters are escaped.
	a.stdout, a.stderr = history.PrintableWriter(a.stdout), history.PrintableWriter(a.stderr)
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
	fmt.Fprintf(a.stderr, "lab: unknown command %q (the commands are: %s)\nrun 'lab --help' for usage\n", args[0], strings.Join(commandNames(), ", "))
	return exitUsage
}

func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `lab: a laboratory for leases with fencing tokens.

Usage:
  lab [command] [arguments]

Commands:
`)
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprint(w, `
With no command, lab runs "watch" on the default scenario (`+spec.DefaultScenario+`).
Run "lab <command> --help" for a command's flags. Exit status: 0 when
nothing broke (and every fixture passed), 1 when the fenced mode broke an
invariant or a lock broke mutual exclusion (a bug in the lock) or a fixture
failed, 2 for bad input, 130 when interrupted.
`)
}

// newFlagSet makes a subcommand's flag set, with a usage that says what
// the subcommand does before its flags. The usage is printed for --help
// only: a bad flag is reported by flagExit in one line.
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
//
// A bad flag is returned as a *flagError, and nothing is printed: the
// flag package's own report (its wording, then the whole usage) would be
// a second style beside the one-line errors of range checks. --help is
// returned as flag.ErrHelp, also unprinted.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	var bad *flagError
	watched := watchValues(fs, &bad)
	defer func() {
		fs.Usage = usage
		fs.SetOutput(out)
		for f, v := range watched {
			f.Value = v
		}
	}()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if bad != nil {
				return nil, bad
			}
			return nil, syntaxError(err)
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

// flagError is a flag given a value it cannot take, or a command-line
// argument that is no flag the command has.
type flagError struct {
	flag    string // the flag's name as typed, without dashes
	problem string
}

func (e *flagError) Error() string { return "--" + e.flag + ": " + e.problem }

// watchValues wraps every flag's value so that a failed Set records which
// flag and what was wrong in *bad; it returns the original values, for
// the caller to put back.
func watchValues(fs *flag.FlagSet, bad **flagError) map[*flag.Flag]flag.Value {
	orig := make(map[*flag.Flag]flag.Value)
	fs.VisitAll(func(f *flag.Flag) {
		orig[f] = f.Value
		f.Value = &watchedValue{Value: f.Value, name: f.Name, bad: bad}
	})
	return orig
}

type watchedValue struct {
	flag.Value
	name string
	bad  **flagError
}

// IsBoolFlag keeps a boolean flag boolean (--json, not --json=true).
func (v *watchedValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func (v *watchedValue) Set(s string) error {
	err := v.Value.Set(s)
	if err != nil {
		*v.bad = &flagError{flag: v.name, problem: valueProblem(v.Value, s, err)}
	}
	return err
}

// valueProblem says what is wrong with s for a flag holding v. A knob
// says it itself; the flag package's own values only say "parse error",
// so the problem is named from the value's type.
func valueProblem(v flag.Value, s string, err error) string {
	problem := err.Error()
	if _, knob := v.(*knobValue); !knob {
		var got any
		if g, ok := v.(flag.Getter); ok {
			got = g.Get()
		}
		switch got.(type) {
		case bool:
			problem = "must be true or false"
		case int, int64:
			problem = "must be an integer"
		case uint, uint64:
			problem = "must be an integer >= 0"
		case float64:
			problem = "must be a number"
		case time.Duration:
			problem = "must be a duration such as 950ms or 1.5s"
		}
		if err.Error() == "value out of range" { // the flag package's errRange
			problem += " that fits in 64 bits"
		}
	}
	if strings.Contains(problem, `"`) {
		return problem // it already quotes what it could not read
	}
	return fmt.Sprintf("%s, got %q", problem, s)
}

// syntaxError turns the flag package's errors that are not about a
// value (no such flag, a missing value, ---x) into a *flagError. Their
// text is the only thing the flag package gives; what it does not match
// is kept as it is.
func syntaxError(err error) error {
	msg := err.Error()
	for _, p := range []struct{ prefix, problem string }{
		{"flag provided but not defined: -", "no such flag"},
		{"flag needs an argument: -", "needs a value"},
	} {
		if name, ok := strings.CutPrefix(msg, p.prefix); ok {
			return &flagError{flag: name, problem: p.problem}
		}
	}
	if arg, ok := strings.CutPrefix(msg, "bad flag syntax: "); ok {
		return fmt.Errorf("%q: bad flag syntax (a flag is -name or --name)", arg)
	}
	return err
}

// flagExit reports a parseArgs error and returns the exit code: --help
// prints the usage and is a success; anything else is bad input, said in
// one line.
func (a *app) flagExit(fs *flag.FlagSet, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return exitOK
	}
	return a.badInput(strings.TrimPrefix(fs.Name(), "lab "), err)
}

// badInput reports bad input and returns exitUsage. A problem with the
// command line (a flag, or the arguments) is followed by where to read the
// usage; a problem in a file or a scenario name is not.
func (a *app) badInput(cmd string, err error) int {
	aboutCommandLine := false
	for _, line := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		fmt.Fprintf(a.stderr, "lab %s: %s\n", cmd, line)
		aboutCommandLine = aboutCommandLine || strings.HasPrefix(line, "-") || strings.HasPrefix(line, `"-`)
	}
	var args *argumentsError
	if aboutCommandLine || errors.As(err, &args) {
		fmt.Fprintf(a.stderr, "run 'lab %s --help' for usage\n", cmd)
	}
	return exitUsage
}

// argumentsError is a wrong number of positional arguments: a command
// takes at most one (a scenario or a file; what names it otherwise), or
// none.
type argumentsError struct {
	takesOne bool
	what     string // what the one argument is, if not "scenario or file"
	got      []string
}

func (e *argumentsError) Error() string {
	if !e.takesOne {
		return fmt.Sprintf("takes no arguments, got %q", e.got)
	}
	what := e.what
	if what == "" {
		what = "scenario or file"
	}
	return fmt.Sprintf("takes one %s, got %d: %q", what, len(e.got), e.got)
}

// vacuousNote is what lab cmd says of a run whose fenced mode made no
// write: no verdict of safety, since nothing was put to the test.
func vacuousNote(cmd string) string {
	return "lab " + cmd + ": vacuous: the fenced mode made no write, so nothing was put to the test (exit status 1)"
}
