package leasefence_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// endRecorder is a SessionTrace that keeps what End reported.
type endRecorder struct {
	mu   sync.Mutex
	ends []leasefence.SessionEndInfo
}

func (r *endRecorder) trace() *leasefence.SessionTrace {
	return &leasefence.SessionTrace{End: func(info leasefence.SessionEndInfo) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ends = append(r.ends, info)
	}}
}

func (r *endRecorder) got() []leasefence.SessionEndInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]leasefence.SessionEndInfo(nil), r.ends...)
}

// SessionTrace.End reports each session's end once, with why in one word,
// whichever goroutine noticed it, so a metric can count losses by cause.
func TestSessionTraceReportsTheEndOnce(t *testing.T) {
	for _, tt := range []struct {
		name string
		want leasefence.SessionEndReason
		end  func(t *testing.T, f *sessionFixture, s *leasefence.Session)
	}{
		{"released", leasefence.SessionReleased, func(t *testing.T, f *sessionFixture, s *leasefence.Session) {
			if _, err := s.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
		{"expired", leasefence.SessionExpired, func(t *testing.T, f *sessionFixture, s *leasefence.Session) {
			f.svc.failRenews.Store(true)
			f.time.waitArmed(t, 2)
			f.time.client.Advance(3 * time.Second) // the deadline, read below
			_ = s.Err()
		}},
		{"refused", leasefence.SessionRefused, func(t *testing.T, f *sessionFixture, s *leasefence.Session) {
			f.time.waitArmed(t, 2)
			if out, err := f.coord.Release(s.Token()); err != nil || !out.OK {
				t.Fatalf("Release behind the session's back = %+v, %v", out, err)
			}
			f.time.Advance(time.Second)
			waitClosed(t, s.Lost(), "Lost after a refused renewal")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newSessionFixture(t)
			var rec endRecorder
			s := f.hold(t, leasefence.HoldOptions{Trace: rec.trace()})
			if got := rec.got(); len(got) != 0 {
				t.Fatalf("End reported %v while the session holds", got)
			}
			tt.end(t, f, s)
			// Every later read, and a Release after the end, reports nothing more.
			_, _ = s.Remaining()
			_ = s.Context().Err()
			_, _ = s.Release(context.Background())
			got := rec.got()
			if len(got) != 1 {
				t.Fatalf("End reported %d times: %v", len(got), got)
			}
			if got[0].Reason != tt.want || got[0].Token != s.Token() || got[0].Err != s.Err() || !errors.Is(got[0].Err, leasefence.ErrLeaseLost) {
				t.Fatalf("End = %+v, want reason %q, the session's token and Err %v", got[0], tt.want, s.Err())
			}
		})
	}
}
