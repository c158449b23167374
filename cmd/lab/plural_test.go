package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/leasefence/lab/fixtures"
	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/scenario"
)

// Every message of the command that prints a count agrees with it, at 0,
// 1 and 2.
func TestCountsAgree(t *testing.T) {
	// fixture is a run of seeds (a fixture has at least one) with n
	// expectations and that many failures on its first seed, or
	// interrupted before any seed ran.
	fixture := func(n, seeds, failures int, interrupted bool) *fixtureRun {
		fx := &scenario.Fixture{Name: "fx", Expect: make([]scenario.Expectation, n)}
		o := &fixtures.Outcome{Fixture: fx}
		for i := range seeds {
			fx.Seeds = append(fx.Seeds, uint64(i+1))
		}
		if interrupted {
			o.Err = context.Canceled
		} else {
			so := fixtures.SeedOutcome{Seed: 1, Failures: make([]fixtures.Failure, failures)}
			o.Seeds = append(o.Seeds, so)
		}
		return &fixtureRun{file: "fx.yaml", fixture: fx, outcome: o}
	}
	messages := []struct {
		name string
		text func(n int) string
		want [3]string
	}{
		{"of seeds", func(n int) string { return ofSeeds(n, n) }, [3]string{"0 of 0 seeds", "1 of 1 seed", "2 of 2 seeds"}},
		{"undelivered spans", func(n int) string { return undelivered(int64(n)) },
			[3]string{"0 spans were not delivered", "1 span was not delivered", "2 spans were not delivered"}},
		{"junit expectations", func(n int) string {
			var b bytes.Buffer
			if err := writeJUnit(&b, []*fixtureRun{fixture(n, 1, n, false)}, 0); err != nil {
				t.Fatal(err)
			}
			return b.String()
		}, [3]string{"fx: 0 expectations over seed 1", "fx: 1 expectation over seed 1", "fx: 2 expectations over seed 1"}},
		{"junit failures", func(n int) string {
			var b bytes.Buffer
			if err := writeJUnit(&b, []*fixtureRun{fixture(n, 1, n, false)}, 0); err != nil {
				t.Fatal(err)
			}
			return b.String()
		}, [3]string{"<testcase", `message="1 failed expectation"`, `message="2 failed expectations"`}},
		{"junit interrupted", func(n int) string {
			var b bytes.Buffer
			if err := writeJUnit(&b, []*fixtureRun{fixture(0, n+1, 0, true)}, 0); err != nil {
				t.Fatal(err)
			}
			return b.String()
		}, [3]string{"0 of 1 seed ran", "0 of 2 seeds ran", "0 of 3 seeds ran"}},
		{"fixture failures not shown", func(n int) string {
			var b bytes.Buffer
			a := &app{stdout: &b}
			a.printFixture(fixture(0, 1, maxFailureLines+n, false), false)
			return b.String()
		}, [3]string{"FAIL fx", "... and 1 more failure (-v", "... and 2 more failures (-v"}},
		{"fixture interrupted", func(n int) string {
			var b bytes.Buffer
			a := &app{stdout: &b}
			a.printFixture(fixture(0, n+1, 0, true), false)
			return b.String()
		}, [3]string{"interrupted after 0 of 1 seed\n", "interrupted after 0 of 2 seeds", "interrupted after 0 of 3 seeds"}},
		{"swarm summary", func(n int) string {
			var b bytes.Buffer
			writeSwarmReport(&b, &swarmSummary{SwarmResult: &harness.SwarmResult{Scenario: "x", FirstSeed: 1, LastSeed: uint64(n), Seeds: n, NaiveSeedsStale: n}, Interrupted: true})
			return b.String()
		}, [3]string{"(in 0 of 0 seeds)", "(in 1 of 1 seed)", "(in 2 of 2 seeds)"}},
	}
	for _, m := range messages {
		for n := range 3 {
			if got := m.text(n); !strings.Contains(got, m.want[n]) {
				t.Errorf("%s at %d:\n%s\ndoes not contain %q", m.name, n, got, m.want[n])
			}
		}
	}
}
