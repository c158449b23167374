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
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "peakrss: %v: %v\n", args, err)
		os.Exit(2)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok || ru.Maxrss == 0 {
		fmt.Fprintln(os.Stderr, "peakrss: no rusage of a child process here")
		os.Exit(3)
	}
	fmt.Printf("maxrss %d\n", ru.Maxrss)
	os.Exit(0)
}

// Of runs args (a command and its arguments), with env added to this
// process's environment, as a grandchild of this test binary, and returns
// its peak resident memory in kilobytes. The test binary's TestMain must
// call ServeIfAsked first.
func Of(env []string, args ...string) (kb int64, err error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), env...), cmdEnv+"="+strings.Join(args, "\x1f"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("peakrss: %v: %w\n%s", args, err, stderr.String())
	}
	if _, err := fmt.Sscanf(string(out), "maxrss %d", &kb); err != nil {
		return 0, fmt.Errorf("peakrss: the intermediate said %q: %w", out, err)
	}
	return kb, nil
}
