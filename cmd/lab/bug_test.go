package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/leasefence/lab/history"
)

// A run whose history holds an event the checker could not read blames the
// runner, not the library; a broken invariant blames the library, or the
// lock under test when it is another's; fences lost in a failover blame
// the failover.
func TestReportBugBlames(t *testing.T) {
	for _, tc := range []struct {
		violation, want, not string
		library              string // of the mode's lock; "" for the lab's own
	}{
		{"1 event" + history.UnreadableViolation + " (the first: bad history: check_failed event names no agent)",
			"BUG IN THE LAB: the run recorded events the checker could not read.", "LEASEFENCE", ""},
		{"1 stale write landed through the gate", "BUG IN LEASEFENCE: the fenced mode broke a safety invariant it promises.", "THE LAB", ""},
		// Fences the store lost in a failover are the store's, and the
		// banner says what keeps them.
		{"8 fences" + history.FailoverReuseViolation, "THE FAILOVER LOST FENCES", "BUG IN", ""},
		{"1 mutual-exclusion violation" + history.ExclusionViolation, "A LOCK UNDER TEST IS WRONG: the fenced mode broke a safety invariant",
			"LEASEFENCE:", "example.com/twicelock.Lock"},
	} {
		var stderr bytes.Buffer
		a := &app{stdout: &bytes.Buffer{}, stderr: &stderr}
		res := &history.Result{Scenario: "x", Modes: map[history.Mode]*history.Report{history.Fenced: {Violations: []string{tc.violation},
			Contender: history.Contender{Library: tc.library}}}}
		a.reportBug(res, "lab run x")
		if got := stderr.String(); !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
			t.Errorf("%q:\n%s\nwant %q, not %q", tc.violation, got, tc.want, tc.not)
		}
	}
}
