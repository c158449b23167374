// Package peakrss measures the peak resident memory of a command, as the
// kernel counts it (ru_maxrss), for the tests and benchmarks that hold the
// lab's memory to a bound.
//
// Linux counts in a child's ru_maxrss the memory of the process it was
// started from, up to its exec: os/exec starts a child sharing its
// parent's memory, so a child of a test process that has grown reports
// that process's peak, not its own. Of therefore runs the command as a
// grandchild, through the running test binary started afresh
// (ServeIfAsked), which is small when it starts the command and reports
// the command's rusage alone.
package peakrss

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
)

// cmdEnv names, for the intermediate process, the command to run: its
// arguments joined by the unit separator (0x1f).
const cmdEnv = "LEASEFENCE_PEAKRSS_CMD"

// ServeIfAsked makes a test binary the intermediate process of Of when
// cmdEnv is set: it runs the command, prints "maxrss N" (kilobytes) and
// exits. It returns at once otherwise. Call it first in TestMain.
func ServeIfAsked() {
	spec, ok := os.LookupEnv(cmdEnv)
	if !ok {
		return
	}
	args := strings.Split(spec, "\x1f")
	cmd := exec.Command(args[0], args[1:]...)
	// The command must not serve in turn: it may be this binary again.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, cmdEnv+"=") })
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	// A command that ran and exited non-zero is measured all the same:
	// its exit status is reported beside its memory.
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		fmt.Fprintf(os.Stderr, "peakrss: %v: %v\n", args, err)
		os.Exit(2)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok || ru.Maxrss == 0 {
		fmt.Fprintln(os.Stderr, "peakrss: no rusage of a child process here")
		os.Exit(3)
	}
	fmt.Printf("maxrss %d exit %d\n", ru.Maxrss, cmd.ProcessState.ExitCode())
	os.Exit(0)
}

// Usage is what Run measured of a command.
type Usage struct {
	KB     int64  // peak resident memory, in kilobytes
	Exit   int    // its exit status
	Stderr string // what it wrote to its standard error
}

// Of runs args (a command and its arguments), with env added to this
// process's environment, as a grandchild of this test binary, and returns
// its peak resident memory in kilobytes; a command that exits non-zero is
// an error. The test binary's TestMain must call ServeIfAsked first.
func Of(env []string, args ...string) (kb int64, err error) {
	u, err := Run(env, args...)
	if err == nil && u.Exit != 0 {
		err = fmt.Errorf("peakrss: %v: exit status %d\n%s", args, u.Exit, u.Stderr)
	}
	return u.KB, err
}

// Run is Of for a command whose exit status is part of what a test
// checks: it returns the command's exit status and standard error beside
// its peak memory, and an error only when it could not be measured.
func Run(env []string, args ...string) (Usage, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), env...), cmdEnv+"="+strings.Join(args, "\x1f"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Usage{}, fmt.Errorf("peakrss: %v: %w\n%s", args, err, stderr.String())
	}
	u := Usage{Stderr: stderr.String()}
	if _, err := fmt.Sscanf(string(out), "maxrss %d exit %d", &u.KB, &u.Exit); err != nil {
		return Usage{}, fmt.Errorf("peakrss: the intermediate said %q: %w", out, err)
	}
	return u, nil
}
