package history_test

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
)

func contenderHeader(modes ...history.Mode) history.Header {
	return history.Header{Format: history.FormatVersion, Scenario: "s", Modes: modes, TTL: time.Second,
		Agents: []string{"agent-1"}, Resources: []string{"res-1"}}
}

// A mode is an open name: the lab's own two need no description, any
// other needs the header's, and its discipline decides whether the
// checker holds it to the fenced invariants.
func TestContenders(t *testing.T) {
	h := contenderHeader(history.Naive, history.Fenced, "redsync", "etcd-mutex-fenced")
	h.Contenders = []history.Contender{
		{Name: "redsync", Library: "github.com/go-redsync/redsync/v4", Version: "v4.18.0", Discipline: history.DisciplineNaive},
		{Name: "etcd-mutex-fenced", Fence: true, Discipline: history.DisciplineFenced},
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	for m, want := range map[history.Mode]bool{history.Naive: false, history.Fenced: true, "redsync": false, "etcd-mutex-fenced": true} {
		if got := h.Fenced(m); got != want {
			t.Errorf("Fenced(%s) = %v, want %v", m, got, want)
		}
	}
	if c := h.Contender("redsync"); c.Library != "github.com/go-redsync/redsync/v4" || c.Fence {
		t.Errorf("Contender(redsync) = %+v", c)
	}
	if got := history.ReportOrder([]history.Mode{"redsync", history.Fenced, "etcd-mutex-fenced", history.Naive}); !slices.Equal(got,
		[]history.Mode{history.Naive, history.Fenced, "etcd-mutex-fenced", "redsync"}) {
		t.Errorf("ReportOrder = %v", got)
	}

	for name, bad := range map[string]history.Header{
		"undescribed": contenderHeader(history.Fenced, "redsync"),
		"fenced, no fence": func() history.Header {
			h := contenderHeader("x")
			h.Contenders = []history.Contender{{Name: "x", Discipline: history.DisciplineFenced}}
			return h
		}(),
		"unknown discipline": func() history.Header {
			h := contenderHeader("x")
			h.Contenders = []history.Contender{{Name: "x", Discipline: "sloppy"}}
			return h
		}(),
	} {
		if err := bad.Validate(); !errors.Is(err, history.ErrBadHistory) {
			t.Errorf("%s: Validate = %v, want ErrBadHistory", name, err)
		}
	}
}

// The checker holds a mode to the fenced invariants by its contender's
// discipline, not by its name: fenced's stale write, renamed to a third
// contender, is that contender's violation if it is fenced, and a finding
// if it is naive.
func TestCheckerJudgesByDiscipline(t *testing.T) {
	h, events, err := history.ReadFile(filepath.Join("testdata", "stale_write.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Modes[0] != history.Fenced {
		t.Fatalf("testdata/stale_write.jsonl is of mode %s, want fenced", h.Modes[0])
	}
	for _, d := range []history.Discipline{history.DisciplineFenced, history.DisciplineNaive} {
		const name = "third"
		h2 := h
		h2.Modes = []history.Mode{name}
		h2.Contenders = []history.Contender{{Name: name, Fence: true, Discipline: d}}
		renamed := slices.Clone(events)
		for i := range renamed {
			renamed[i].Mode = name
		}
		rep := history.Check(h2, renamed).Modes[name]
		if rep == nil || rep.StaleWritesLanded != 1 {
			t.Fatalf("%s: report %+v, want the stale write counted", d, rep)
		}
		if got := len(rep.Violations) > 0; got != (d == history.DisciplineFenced) {
			t.Errorf("%s contender: violations %v", d, rep.Violations)
		}
	}
}
