package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

// While an etcd member fault is in force the header says which member,
// what was done to it and how long it has left; before and after, nothing.
func TestHeaderShowsMemberFaults(t *testing.T) {
	faults := []liveview.MemberFaultView{
		{At: 3 * time.Second, Intervention: history.Intervention{Kind: history.PauseMember, Member: 1, Leader: true, Duration: 2500 * time.Millisecond}},
		{At: 4 * time.Second, Intervention: history.Intervention{Kind: history.PartitionMember, Member: 2, Duration: 2 * time.Second, Value: 0.2}},
		{At: 8 * time.Second, Intervention: history.Intervention{Kind: history.PartitionMember, Member: 3, Duration: 3 * time.Second}},
		{At: 12 * time.Second, Intervention: history.Intervention{Kind: history.PauseMember, Member: 1, Duration: time.Second}, NotApplied: "not applied: gone"},
	}
	for _, tc := range []struct {
		now  time.Duration
		want string
	}{
		{2 * time.Second, ""},
		{3500 * time.Millisecond, "etcd: member 1 (leader) paused, 2.000s left"},
		{4500 * time.Millisecond, "etcd: member 1 (leader) paused, 1.000s left; member 2 delayed 200ms, 1.500s left"},
		{9 * time.Second, "etcd: member 3 cut off, 2.000s left"},
		{12500 * time.Millisecond, ""},
	} {
		snap := liveview.Snapshot{Mode: history.Fenced, Now: tc.now, Duration: 20 * time.Second, MemberFaults: faults}
		p := headerPane{st: defaultStyles(), info: runInfo{name: "etcd-partition", modes: []history.Mode{history.Fenced}}, width: 200}
		p.set(&snap, history.Fenced, false, false, 1)
		line := ansi.Strip(p.lines[1])
		_, note, found := strings.Cut(line, "  etcd: ")
		switch {
		case tc.want == "" && found:
			t.Errorf("at %v the header says %q, want no member fault", tc.now, note)
		case tc.want != "" && !strings.HasSuffix(line, "  "+tc.want):
			t.Errorf("at %v the header's clock line is\n%s\nwant it to end %q", tc.now, line, tc.want)
		}
	}
}
