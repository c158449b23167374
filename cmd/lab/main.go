package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/mattn/go-isatty"

	"github.com/leasefence/lab/procdriver"
	"github.com/leasefence/lab/realtime"
)

func main() {
	realtime.ServeIfAsked() // a server an adapter runs as this binary: an etcd member of --etcd-members N
	procdriver.RunIfChild() // an agent of a run with --agents-as process
	os.Exit(Main())
}

// Main runs the command with the process's arguments and standard streams
// and returns its exit code. The first Ctrl-C (SIGINT) or SIGTERM cancels
// the work in progress, which then prints what it had and flushes its
// traces; a second one kills the process as usual.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // restore the default action for the next signal
	}()
	return newApp().main(ctx, os.Args[1:])
}

// newApp is the command wired to the process: its streams, whether they
// are terminals, and the real dashboard.
func newApp() *app {
	return &app{
		stdout:    os.Stdout,
		stderr:    os.Stderr,
		stdoutTTY: isTerminal(os.Stdout),
		stderrTTY: isTerminal(os.Stderr),
		dashboard: runDashboard,
	}
}

func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}
