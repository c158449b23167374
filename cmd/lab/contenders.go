package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	// Every adapter registers itself: the backends and stores the flags
	// choose, and the library contenders, whose libraries' versions the
	// listing shows.
	_ "github.com/leasefence/lab/realtime/adapters"
	"github.com/leasefence/lab/registry"
)

// contenders is `lab contenders`: one line per contender, the name first,
// then what it is, whether it has a fence, its write discipline and the
// backends it runs on; what each is in words below.
func (a *app) contenders(_ context.Context, args []string) int {
	fs := a.newFlagSet("contenders", "", `Lists the contenders, the locks a run puts under the same scenario, faults and
checker: the name, the library (and version) it is, whether its leases carry a
fence, its write discipline (naive: the holder checks its own deadline; fenced:
it writes through the resource's gate), and the backends it runs on.`)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return a.flagExit(fs, err)
	}
	if len(pos) > 0 {
		return a.badInput("contenders", &argumentsError{got: pos})
	}
	w := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tLIBRARY\tFENCE\tDISCIPLINE\tRUNS ON")
	all := registry.All(registry.Contenders)
	for _, c := range all {
		lib := strings.TrimSpace(c.Library + " " + c.Version)
		fence := map[bool]string{true: "yes", false: "no"}[c.Fence]
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", c.Name, lib, fence, c.Discipline, strings.Join(c.RunsOn, ", "))
	}
	w.Flush()
	fmt.Fprintln(a.stdout)
	for _, c := range all {
		fmt.Fprintf(a.stdout, "%s: %s\n", c.Name, c.Doc)
	}
	return exitOK
}
