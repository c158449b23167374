package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/liveview"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// glyphs draws row as plain glyphs.
func glyphs(row []cell, perResource bool) string {
	var b strings.Builder
	for i := range row {
		b.WriteByte(rankGlyphs[row[i].glyph(perResource)])
	}
	return b.String()
}

func TestLaneCells(t *testing.T) {
	seg := func(from int, s history.AgentState) liveview.Segment {
		return liveview.Segment{From: ms(from), State: s, Resource: 0}
	}
	mark := func(at int, k history.MarkKind) liveview.Mark { return liveview.Mark{At: ms(at), Kind: k} }
	// Ten cells of 100ms over [0, 1s).
	tests := []struct {
		name  string
		now   int
		segs  []liveview.Segment
		marks []liveview.Mark
		want  string
	}{
		{name: "one state to now", now: 1000, segs: []liveview.Segment{seg(0, history.AgentIdle)}, want: ".........."},
		{name: "nothing drawn after now", now: 450, segs: []liveview.Segment{seg(0, history.AgentHolding)}, want: "#####     "},
		{name: "nothing before the first segment", now: 1000, segs: []liveview.Segment{seg(300, history.AgentWaiting)}, want: "   ???????"},
		{name: "a state ending on a cell edge does not spill into the next", now: 1000,
			segs: []liveview.Segment{seg(0, history.AgentHolding), seg(500, history.AgentIdle)}, want: "#####....."},
		{name: "a brief hold beats idle", now: 1000,
			segs: []liveview.Segment{seg(0, history.AgentIdle), seg(410, history.AgentHolding), seg(420, history.AgentIdle)}, want: "....#....."},
		{name: "holding or stalled: the longer wins", now: 1000,
			segs: []liveview.Segment{seg(0, history.AgentHolding), seg(140, history.AgentStalled), seg(200, history.AgentHolding), seg(260, history.AgentStalled)},
			want: "#~#~~~~~~~"},
		{name: "believing an expired lease is never hidden", now: 1000,
			segs: []liveview.Segment{seg(0, history.AgentStalled), seg(590, history.AgentZombie), seg(600, history.AgentIdle)}, want: "~~~~~!...."},
		{name: "writes mark their cell; refused and stale beat admitted", now: 1000,
			segs:  []liveview.Segment{seg(0, history.AgentHolding)},
			marks: []liveview.Mark{mark(50, history.MarkAdmitted), mark(250, history.MarkAdmitted), mark(260, history.MarkRefused), mark(999, history.MarkStale)},
			want:  "+#x######S"},
		{name: "a mark at now is drawn", now: 300, segs: []liveview.Segment{seg(0, history.AgentHolding)},
			marks: []liveview.Mark{mark(300, history.MarkRefused)}, want: "###x      "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := make([]cell, 10)
			c := cellMap{from: 0, width: time.Second, now: ms(tt.now), cols: 10}
			c.paintLane(row, &liveview.Lane{Segments: tt.segs, Marks: tt.marks})
			if got := glyphs(row, false); got != tt.want {
				t.Errorf("lane %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResourceLanesFoldAgents(t *testing.T) {
	// Two agents on res-1 (index 0): agent-1 holds, then believes an
	// expired lease while agent-2 holds; agent-2's admitted write is left
	// out of the folded lane, agent-1's refused write is not. A third
	// agent waits on res-2 the whole time.
	snap := &liveview.Snapshot{
		Now: time.Second, Duration: time.Second, Window: liveview.TimelineWindow,
		Holders: []liveview.HolderView{{Resource: "res-1"}, {Resource: "res-2"}},
		Agents:  make([]liveview.AgentView, 3),
		Lanes: []liveview.Lane{
			{Agent: "agent-1", Segments: []liveview.Segment{{From: 0, State: history.AgentHolding, Resource: 0},
				{From: ms(400), State: history.AgentZombie, Resource: 0}, {From: ms(700), State: history.AgentIdle, Resource: -1}},
				Marks: []liveview.Mark{{At: ms(650), Kind: history.MarkRefused, Resource: 0}}},
			{Agent: "agent-2", Segments: []liveview.Segment{{From: 0, State: history.AgentIdle, Resource: -1},
				{From: ms(400), State: history.AgentHolding, Resource: 0}},
				Marks: []liveview.Mark{{At: ms(450), Kind: history.MarkAdmitted, Resource: 0}}},
			{Agent: "agent-3", Segments: []liveview.Segment{{From: 0, State: history.AgentWaiting, Resource: 1}}},
		},
	}
	p := newTimelinePane(defaultStyles())
	p.SetSize(len("> res-1 ")+10, 3) // one lane fits: fold per resource
	p.setSnapshot(snap, selection{res: 0}, nil)
	if !p.perResource || len(p.lanes) != 1 {
		t.Fatalf("per resource %v with %d lanes, want one folded lane", p.perResource, len(p.lanes))
	}
	if want := "> res-1 ####!!x###"; p.lanes[0] != want {
		t.Errorf("res-1 lane %q, want %q", p.lanes[0], want)
	}
	p.setSnapshot(snap, selection{res: 1}, nil)
	if want := "> res-2 ??????????"; p.lanes[0] != want {
		t.Errorf("res-2 lane %q, want %q (the lanes scroll with the selection)", p.lanes[0], want)
	}
}

func TestWindow(t *testing.T) {
	tests := []struct{ n, rows, sel, want int }{
		{n: 5, rows: 10, sel: 4, want: 0},
		{n: 100, rows: 10, sel: 0, want: 0},
		{n: 100, rows: 10, sel: 50, want: 45},
		{n: 100, rows: 10, sel: 99, want: 90},
		{n: 100, rows: 0, sel: 50, want: 0},
	}
	for _, tt := range tests {
		if got := window(tt.n, tt.rows, tt.sel); got != tt.want {
			t.Errorf("window(%d, %d, %d) = %d, want %d", tt.n, tt.rows, tt.sel, got, tt.want)
		}
		if tt.rows > 0 && (tt.sel < window(tt.n, tt.rows, tt.sel) || tt.sel >= window(tt.n, tt.rows, tt.sel)+tt.rows) {
			t.Errorf("window(%d, %d, %d) hides the selection", tt.n, tt.rows, tt.sel)
		}
	}
}
