package report

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

func recordTimeline(t *testing.T, name string) *Timeline {
	t.Helper()
	sc, _ := spec.Builtin(name)
	rec := NewTimeline(sc.Header(harness.Modes))
	if _, err := harness.Run(t.Context(), sc, harness.RunOptions{Subscribers: []history.Subscriber{rec}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range rec.modes {
		m.finish(sc.Duration)
	}
	return rec
}

// lane writes an agent's lane as "state@from ..." for comparison.
func lane(m *modeTimeline, agent int) string {
	var parts []string
	for _, s := range m.agents[agent].segs {
		parts = append(parts, fmt.Sprintf("%s@%v", stateClass(s.state), s.from))
	}
	return strings.Join(parts, " ")
}

// TestTimelineDesignNote checks the lanes rebuilt from the events against
// the gap and renewal scenarios' timelines.
func TestTimelineDesignNote(t *testing.T) {
	// The network of these scenarios has no delay: a request sent at t is
	// answered at t, so the waiting in between takes no time and leaves no
	// segment.
	tests := []struct {
		scenario string
		mode     history.Mode
		agent    int
		want     string
	}{
		// A holds from 0, checks at 950ms and stalls; the coordinator lets
		// it go at 1000ms while its write is in flight; the write lands
		// (naive) or is refused (fenced) at 1400ms and A stops acting.
		{"gap", history.Fenced, 0, "holding@0s stalled@950ms zombie@1s idle@1.4s"},
		{"gap", history.Naive, 0, "holding@0s stalled@950ms zombie@1s idle@1.4s"},
		// B takes over at 1000ms and holds its 1s lease to the end of it.
		{"gap", history.Fenced, 1, "idle@0s holding@1s idle@2s"},
		// Naive A dates its renewal from the reply: it believes until
		// 2000ms, 860ms past the coordinator's 1140ms.
		{"renewal", history.Naive, 0, "holding@0s zombie@1.14s idle@2s"},
		// The client anchors at the send instant: it believes until 1100ms,
		// inside the coordinator's window.
		{"renewal", history.Fenced, 0, "holding@0s idle@1.1s"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%s", tt.scenario, tt.mode, spec.AgentName(tt.agent)), func(t *testing.T) {
			rec := recordTimeline(t, tt.scenario)
			if got := lane(rec.modes[tt.mode], tt.agent); got != tt.want {
				t.Errorf("lane\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestTimelineWritesAndLinks(t *testing.T) {
	rec := recordTimeline(t, "gap")
	f := rec.modes[history.Fenced]
	if len(f.writes) != 2 {
		t.Fatalf("writes = %+v", f.writes)
	}
	floor, refused := f.writes[0], f.writes[1]
	if floor.kind != history.MarkAdmitted || floor.agent != 1 || floor.at != 1010*time.Millisecond {
		t.Errorf("first write = %+v", floor)
	}
	if refused.kind != history.MarkRefused || refused.agent != 0 || refused.at != 1400*time.Millisecond || refused.link != floor.id {
		t.Errorf("refused write = %+v, want a link to %s", refused, floor.id)
	}
	n := rec.modes[history.Naive]
	if stale := n.writes[1]; stale.kind != history.MarkStale || stale.link != n.writes[0].id || stale.otherFence != 2 {
		t.Errorf("naive stale write = %+v", stale)
	}
}

func TestTimelineFaults(t *testing.T) {
	rec := recordTimeline(t, "partition")
	var band *fault
	for i, f := range rec.modes[history.Fenced].faults {
		if f.kind == "partition" {
			band = &rec.modes[history.Fenced].faults[i]
		}
	}
	if band == nil || band.agent != 0 || band.from != 5*time.Second || band.to != 15*time.Second {
		t.Errorf("partition band = %+v, want agent-1 from 5s to 15s", band)
	}
	rec = recordTimeline(t, "restart-lost")
	if r := rec.modes[history.Fenced].wide; len(r) != 1 || r[0].from != 10*time.Second || r[0].to != r[0].from ||
		r[0].label != "restart on coordinator: fence counter lost" {
		t.Errorf("faults of the run = %+v, want the restart, its counter lost, at 10s", r)
	}
}

// Every fault kind is drawn on the page, on its agent's lane or across
// the run with its target: the timeline knows no kind.
func TestEveryFaultKindDrawn(t *testing.T) {
	sc, _ := spec.Builtin("gap")
	rec := NewTimeline(sc.Header(harness.Modes))
	res, err := harness.Run(t.Context(), sc, harness.RunOptions{Subscribers: []history.Subscriber{rec}})
	if err != nil {
		t.Fatal(err)
	}
	at := sc.Duration / 2
	for _, k := range spec.Faults {
		for _, e := range []history.Event{k.Began(0, "", 10*time.Millisecond), k.Began(-1, "etcd member 9", 10*time.Millisecond)} {
			e.Mode, e.At = history.Fenced, at
			rec.Event(e)
			end := e.Ended()
			end.Mode, end.At = history.Fenced, at+10*time.Millisecond
			rec.Event(end)
		}
	}
	var b strings.Builder
	if err := HTML(&b, res, rec, Stop{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	span := " " + history.FormatDuration(at) + " to " + history.FormatDuration(at+10*time.Millisecond)
	for _, k := range spec.Faults {
		if want := string(k) + span; !strings.Contains(page, want) {
			t.Errorf("the page does not draw %s on agent-1's lane (%q)", k, want)
		}
		if want := string(k) + " on etcd member 9 from" + span; !strings.Contains(page, want) {
			t.Errorf("the page does not draw %s across the run (%q)", k, want)
		}
	}
}

// The table counts the faults played where a run played some, and has no
// such row where none was.
func TestTextCountsFaultsPlayed(t *testing.T) {
	for name, want := range map[string]bool{"partition": true, "restart-lost": true, "gap": false} {
		sc, _ := spec.Builtin(name)
		res, err := harness.Run(t.Context(), sc, harness.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h := sc.Header(harness.Modes)
		var b strings.Builder
		Text(&b, &h, res, Stop{}, Runner{Backend: history.Simulator})
		if got := strings.Contains(b.String(), "\n  faults played                 1        1\n"); got != want {
			t.Errorf("%s: a faults played row of 1 and 1: %v, want %v\n%s", name, got, want, b.String())
		}
	}
}
