package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// scenarios is `lab scenarios`: one line per built-in, the name first.
func (a *app) scenarios(_ context.Context, args []string) int {
	fs := a.newFlagSet("scenarios", "", `Lists the built-in scenarios: the name and its outline, what it shows, and the
backends that can play it. The first is the default of lab and lab run.`)
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
		h := registry.Header(sc, registry.Modes())
		fmt.Fprintf(a.stdout, "%-*s  %s\n%-*s  %s\n%-*s  runs on %s\n", width, n, h.Outline(), width, "", sc.Description,
			width, "", strings.Join(registry.Where(sc), ", "))
	}
	return exitOK
}
