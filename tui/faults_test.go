package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
	"github.com/leasefence/lab/spec"
)

// While a fault is in force the header says which, on what, how and how
// long it has left, whatever its kind; before and after, nothing.
func TestHeaderShowsFaults(t *testing.T) {
	faults := []liveview.FaultView{
		{Kind: "pause_leader", Target: "etcd member 1 (the leader)", At: 3 * time.Second, End: 5500 * time.Millisecond},
		{Kind: "partition_member", Target: "etcd member 2", At: 4 * time.Second, End: 6 * time.Second, Detail: "traffic delayed 200ms"},
		{Kind: "partition", Target: "agent-1", At: 8 * time.Second, End: 11 * time.Second},
		{Kind: "restart", Target: "coordinator", At: 9 * time.Second, End: 9 * time.Second},
		{Kind: "pause_member", Target: "etcd member 1", At: 12 * time.Second, End: 13 * time.Second, NotPlayed: "gone"},
	}
	for _, tc := range []struct {
		now  time.Duration
		want string
	}{
		{2 * time.Second, ""},
		{3500 * time.Millisecond, "faults: pause_leader on etcd member 1 (the leader), 2.000s left"},
		{4500 * time.Millisecond, "faults: pause_leader on etcd member 1 (the leader), 1.000s left; " +
			"partition_member on etcd member 2 (traffic delayed 200ms), 1.500s left"},
		{9 * time.Second, "faults: partition on agent-1, 2.000s left"},
		{12500 * time.Millisecond, ""},
	} {
		snap := liveview.Snapshot{Mode: history.Fenced, Fenced: true, Now: tc.now, Duration: 20 * time.Second, Faults: faults}
		p := headerPane{st: defaultStyles(), info: runInfo{name: "etcd-partition", modes: []history.Mode{history.Fenced}}, width: 300}
		p.set(&snap, history.Fenced, clock{speed: 1})
		line := ansi.Strip(p.lines[1])
		_, note, found := strings.Cut(line, "  faults: ")
		switch {
		case tc.want == "" && found:
			t.Errorf("at %v the header says %q, want no fault", tc.now, note)
		case tc.want != "" && !strings.HasSuffix(line, "  "+tc.want):
			t.Errorf("at %v the header's clock line is\n%s\nwant it to end %q", tc.now, line, tc.want)
		}
	}
}

// Every fault kind the live view folds is in the header while in force,
// with its target: the dashboard knows no kind.
func TestHeaderShowsEveryFaultKind(t *testing.T) {
	h := history.Header{Agents: []string{"agent-1"}, Resources: []string{"res-1"}, Modes: []history.Mode{history.Fenced}}
	for _, k := range spec.Faults {
		fold := liveview.New(&h, history.Fenced, 0)
		for _, e := range []history.Event{k.Began(0, "", 2*time.Second), k.Began(-1, "etcd member 9", 2*time.Second)} {
			e.At = time.Second
			fold.Add(&e)
		}
		snap := fold.Snapshot(1500 * time.Millisecond)
		want := "faults: " + string(k) + " on agent-1, 1.500s left; " + string(k) + " on etcd member 9, 1.500s left"
		if got := faultNote(&snap); got != want {
			t.Errorf("%s: the header says %q, want %q", k, got, want)
		}
	}
}
