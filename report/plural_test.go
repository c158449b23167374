package report

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/leasefence/lab/history"
)

// Every report message that prints a count agrees with it, at 0, 1 and 2.
func TestCountsAgree(t *testing.T) {
	cx := func(n int) []history.Counterexample {
		return make([]history.Counterexample, n)
	}
	messages := []struct {
		name string
		text func(n int) string
		want [3]string
	}{
		{"header", func(n int) string {
			var b bytes.Buffer
			Text(&b, &history.Header{}, &history.Result{Scenario: "x", Events: uint64(n), Modes: map[history.Mode]*history.Report{}}, Stop{}, Runner{})
			return b.String()
		}, [3]string{"· 0 events ·", "· 1 event ·", "· 2 events ·"}},
		{"counterexamples heading", func(n int) string {
			var b bytes.Buffer
			Text(&b, &history.Header{}, &history.Result{Scenario: "x", Modes: map[history.Mode]*history.Report{history.Fenced: {Counterexamples: cx(n)}}}, Stop{}, Runner{})
			return b.String()
		}, [3]string{"fenced: no counterexamples.", "fenced: the first counterexample (1 of 1 kept", "fenced: the first 2 counterexamples (of 2 kept"}},
		{"naive verdict", func(n int) string {
			res := &history.Result{Modes: map[history.Mode]*history.Report{history.Naive: {StaleWritesLanded: n, SilentOverlaps: n}}}
			return strings.Join(verdictParagraphs(res), "\n")
		}, [3]string{"landed 0 stale writes; 0 of its overlaps were silent.", "landed 1 stale write; 1 of its overlaps was silent.",
			"landed 2 stale writes; 2 of its overlaps were silent."}},
		{"naive verdict on reissued fences", func(n int) string {
			res := &history.Result{Modes: map[history.Mode]*history.Report{history.Naive: {ReissuedWritesLanded: n + 1}}}
			return strings.Join(verdictParagraphs(res), "\n")
		}, [3]string{"1 write landed under fences reissued", "2 writes landed under fences reissued", "3 writes landed under fences reissued"}},
		{"page mode summary", func(n int) string {
			return modeSummary(&history.Report{Acquisitions: n, CommitsAdmitted: n, CommitsRefused: n, StaleWritesLanded: n, Overlaps: n, SilentOverlaps: n})
		}, [3]string{"0 acquisitions, 0 writes admitted, 0 refused, 0 stale writes landed, 0 overlaps (0 silent)",
			"1 acquisition, 1 write admitted, 1 refused, 1 stale write landed, 1 overlap (1 silent)",
			"2 acquisitions, 2 writes admitted, 2 refused, 2 stale writes landed, 2 overlaps (2 silent)"}},
		{"real-time run's fault layer", func(n int) string {
			var b bytes.Buffer
			Runner{Backend: "etcd", Real: &RealFigures{Faults: FaultCounts{Calls: int64(n), RequestsDropped: int64(n), RepliesDropped: int64(n)}}}.write(&b, &history.Result{})
			return b.String()
		}, [3]string{"0 calls, 0 requests dropped (0 cut by a partition), 0 replies dropped", "1 call, 1 request dropped (0 cut by a partition), 1 reply dropped",
			"2 calls, 2 requests dropped (0 cut by a partition), 2 replies dropped"}},
		{"page refusals table", func(n int) string { return refusalsSummary(n, 0) },
			[3]string{"0 writes refused or landed stale", "1 write refused or landed stale, with the newer write it lost to",
				"2 writes refused or landed stale, each with"}},
		{"page refusals table, rows not shown", func(n int) string { return refusalsSummary(0, n) },
			[3]string{"0 writes refused", "0 (and 1 more) write refused", "0 (and 2 more) writes refused"}},
	}
	for _, m := range messages {
		for n := range 3 {
			if got := m.text(n); !strings.Contains(got, m.want[n]) {
				t.Errorf("%s at %d:\n%s\ndoes not contain %q", m.name, n, got, m.want[n])
			}
		}
	}
}

// The row of writes under reissued fences is there when a mode counted
// one, and only then.
func TestReissuedRowOnlyWhenCounted(t *testing.T) {
	for _, n := range []int{0, 3} {
		var b bytes.Buffer
		res := &history.Result{Scenario: "x", Modes: map[history.Mode]*history.Report{
			history.Naive: {ReissuedWritesLanded: n}, history.Fenced: {}}}
		Text(&b, &history.Header{}, res, Stop{}, Runner{})
		row := regexp.MustCompile(`(?m)^  reissued writes landed +(\d+) +0$`).FindStringSubmatch(b.String())
		if (row != nil) != (n > 0) || row != nil && row[1] != strconv.Itoa(n) {
			t.Errorf("with %d reissued writes, the row is %q:\n%s", n, row, b.String())
		}
	}
}
