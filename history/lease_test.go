package history

import (
	"path/filepath"
	"strings"
	"testing"
)

// A gate that checks the writer's lease refuses for the lease
// (OutcomeLeaseNotLive): the history must have the lease over by the
// refusal, at the earliest its coordinator expiry can have been, which is
// the TTL from the request's sending, not from the grant's reply. A gate
// that refuses a lease still live by the record is caught.
func TestLeaseNotLiveRefusals(t *testing.T) {
	for _, tc := range []struct {
		file        string
		unexplained int
		detail      string // a substring of the counterexample's detail
	}{
		{"lease_refused_after_end", 0, ""},
		// Its grant came back 300ms after the request was sent, stamped to
		// expire at 1.3s: the coordinator counted from when it got the
		// request, which may be as early as the sending.
		{"lease_refused_after_send_bound", 0, ""},
		// Its grant answered the first sending of r1, whose reply was lost;
		// the retry under the same id, 500ms later, was answered from the
		// replay cache with the same expiry: the bound counts from the
		// first sending.
		{"lease_refused_after_retried_acquire", 0, ""},
		// No request_sent: nothing dates the lease's end, so the refusal
		// is unexplained, for that and not for an acquire never completed.
		{"lease_refused_no_sending", 1, "the history has no sending of the request its grant answered"},
		{"lease_refused_while_live", 1, "calls the lease agent-1@1 not live 100ms before the earliest"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			h, events, err := ReadFile(filepath.Join("testdata", tc.file+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			r := Check(h, events).Modes[Fenced]
			if r.CommitsRefused != 1 || r.LeaseRefusals != 1 {
				t.Errorf("refusals %d, for the lease %d; want 1 and 1", r.CommitsRefused, r.LeaseRefusals)
			}
			if r.UnexplainedRefusals != tc.unexplained {
				t.Errorf("unexplained refusals %d, want %d (%v)", r.UnexplainedRefusals, tc.unexplained, r.Counterexamples)
			}
			if tc.unexplained == 0 {
				return
			}
			if !strings.Contains(strings.Join(r.Violations, "; "), "refusal whose floor the history does not bear out") {
				t.Errorf("violations %q, want the unexplained refusal", r.Violations)
			}
			for _, cx := range r.Counterexamples {
				if cx.Kind == UnexplainedRefusal && strings.Contains(cx.Detail, tc.detail) {
					return
				}
			}
			t.Errorf("no unexplained refusal saying %q among %+v", tc.detail, r.Counterexamples)
		})
	}
}

// A write that lands after its lease ended, before any newer holder's
// write, is lapsed, not stale, in either discipline: the floor admits it.
func TestLapsedWrites(t *testing.T) {
	h, events, err := ReadFile("testdata/lapsed_writes.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	res := Check(h, events)
	for _, tc := range []struct {
		mode          Mode
		lapsed, stale int
	}{
		// Past its coordinator expiry at 1.2s, and expired by the history
		// at 1.4s; the write at 1.6s, after agent-2's, is stale.
		{Naive, 2, 1},
		{Fenced, 1, 0},
	} {
		r := res.Modes[tc.mode]
		if r.LapsedWritesLanded != tc.lapsed || r.StaleWritesLanded != tc.stale {
			t.Errorf("%s: lapsed %d, stale %d; want %d and %d", tc.mode, r.LapsedWritesLanded, r.StaleWritesLanded, tc.lapsed, tc.stale)
		}
		if len(r.Violations) != 0 && tc.mode == Fenced {
			t.Errorf("fenced: a lapsed write is no violation, got %q", r.Violations)
		}
	}
}

// A lock run in place of the lab's coordinator gives as a lease's
// coordinator expiry the deadline its library dates from the request's
// send; the lock can outlive it (a ZooKeeper session whose pings go on
// while its holder stalls, as the later denial shows). Only an end the
// history shows makes such a write lapsed.
func TestLapsedWritesOfALockByItsRecordedEnds(t *testing.T) {
	h, events, err := ReadFile("testdata/lapsed_writes_lock_deadline.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	res := Check(h, events)
	for _, tc := range []struct {
		mode   Mode
		lapsed int
	}{
		// Written at 1.4s, past the library's deadline of 1s, and the
		// lock still held: agent-2 is denied for it at 2s.
		{"zookeeper", 0},
		// The same write at 1.4s, and one at 1.6s, after the expiry the
		// newer grant recorded at 1.5s: that one is lapsed.
		{"zookeeper-fenced", 1},
	} {
		if r := res.Modes[tc.mode]; r.LapsedWritesLanded != tc.lapsed || r.StaleWritesLanded != 0 {
			t.Errorf("%s: lapsed %d, stale %d; want %d and 0", tc.mode, r.LapsedWritesLanded, r.StaleWritesLanded, tc.lapsed)
		}
	}
}
