package main

import (
	"context"
	"fmt"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/spec"
)

// scenarios is `lab scenarios`: one line per built-in, the name first.
func (a *app) scenarios(_ context.Context, args []string) int {
	fs := a.newFlagSet("scenarios", "", `Lists the built-in scenarios, one a line: the name, then what it shows. The
first is the default of lab and lab run.`)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return a.flagExit(fs, err)
	}
	if len(pos) > 0 {
		return a.badInput("scenarios", &argumentsError{got: pos})
	}
	names := spec.BuiltinNames()
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		sc, _ := spec.Builtin(n)
		h := sc.Header(harness.Modes)
		fmt.Fprintf(a.stdout, "%-*s  %s\n%-*s  %s\n", width, n, h.Outline(), width, "", sc.Description)
	}
	return exitOK
}
