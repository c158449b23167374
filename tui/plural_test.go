package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

// Every dashboard line that prints a count agrees with it, at 0, 1 and 2.
func TestCountsAgree(t *testing.T) {
	st := defaultStyles()
	lines := map[string]func(n int) string{
		"header totals": func(n int) string {
			p := headerPane{st: st, width: 200, info: runInfo{name: "x", agents: n, resources: n, modes: []history.Mode{history.Fenced}}}
			p.set(&liveview.Snapshot{Mode: history.Fenced, Fenced: true, Events: uint64(n)}, history.Fenced, clock{speed: 1})
			return p.View()
		},
		"strip, both modes": func(n int) string {
			p := stripPane{st: st, width: 200}
			p.set([]history.Mode{history.Naive, history.Fenced}, []liveview.Snapshot{
				{Totals: liveview.Totals{StaleWritesLanded: n}}, {Fenced: true, Totals: liveview.Totals{CommitsRefused: n}}}, 1, 0)
			return p.view
		},
		"strip, fenced alone": func(n int) string {
			p := stripPane{st: st, width: 200}
			p.set([]history.Mode{history.Fenced}, []liveview.Snapshot{{Fenced: true, Totals: liveview.Totals{StaleWritesLanded: n}}}, 0, -1)
			return p.view
		},
		"strip, forgeries": func(n int) string {
			p := stripPane{st: st, width: 300}
			p.set([]history.Mode{history.Naive, history.Fenced}, []liveview.Snapshot{
				{Totals: liveview.Totals{ForgeriesLanded: n}}, {Fenced: true, Totals: liveview.Totals{CommitsRefused: 3, ForgeriesRefused: n}}}, 1, 0)
			return p.view
		},
		"holders title": func(n int) string {
			p := holdersPane{st: st, mode: history.Fenced, zombies: n, height: 10}
			return p.title()
		},
	}
	want := map[string][3]string{
		"header totals":       {"0 agents on 0 resources", "1 agent on 1 resource", "2 agents on 2 resources"},
		"strip, both modes":   {"naive: 0 landed, 0 refused (no gate)  vs  fenced: 0 landed, 0 refused", "naive: 1 landed, 0 refused (no gate)  vs  fenced: 0 landed, 1 refused", "naive: 2 landed, 0 refused (no gate)  vs  fenced: 0 landed, 2 refused"},
		"strip, fenced alone": {"stale writes  fenced: 0 landed, 0 refused  (run", "stale writes  fenced: 1 landed (a bug), 0 refused  (run", "stale writes  fenced: 2 landed (a bug), 0 refused  (run"},
		// Forged proofs are counted apart from the stale fences refused.
		"strip, forgeries": {"naive: 0 landed, 0 refused (no gate)  vs  fenced: 0 landed, 3 refused  (same",
			"naive: 0 landed, 0 refused (no gate), forgeries 1 landed, 0 refused (no gate)  vs  fenced: 0 landed, 3 refused, forgeries 0 landed, 1 refused  (same",
			"naive: 0 landed, 0 refused (no gate), forgeries 2 landed, 0 refused (no gate)  vs  fenced: 0 landed, 3 refused, forgeries 0 landed, 2 refused  (same"},
		"holders title": {"holders · fenced", "1 agent believes an expired lease", "2 agents believe expired leases"},
	}
	events := [3]string{"0 events", "1 event", "2 events"}
	for name, line := range lines {
		for n := range 3 {
			got := ansi.Strip(line(n))
			if !strings.Contains(got, want[name][n]) {
				t.Errorf("%s at %d: %q does not contain %q", name, n, got, want[name][n])
			}
			if name == "header totals" && !strings.Contains(got, events[n]) {
				t.Errorf("%s at %d: %q does not contain %q", name, n, got, events[n])
			}
			if n == 1 && strings.Contains(got, "1 events") {
				t.Errorf("%s at 1: %q", name, got)
			}
		}
	}
}
