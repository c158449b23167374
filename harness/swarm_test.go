package harness_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leasefence/lab/harness"
)

func TestParallel(t *testing.T) {
	for _, tc := range []struct{ n, jobs int }{{0, 3}, {1, 0}, {7, 1}, {50, 3}, {5, 16}} {
		var (
			mu       sync.Mutex
			calls    = make([]int, tc.n)
			running  atomic.Int64
			most     int64 // the most calls running at once
			progress []int
		)
		err := harness.Parallel(t.Context(), tc.n, tc.jobs, func(i int) error {
			now := running.Add(1)
			defer running.Add(-1)
			mu.Lock()
			calls[i]++
			most = max(most, now)
			mu.Unlock()
			return nil
		}, func(done, total int) {
			mu.Lock()
			defer mu.Unlock()
			if total != tc.n {
				t.Errorf("n=%d: progress total %d", tc.n, total)
			}
			progress = append(progress, done)
		})
		if err != nil {
			t.Fatalf("n=%d jobs=%d: %v", tc.n, tc.jobs, err)
		}
		for i, c := range calls {
			if c != 1 {
				t.Errorf("n=%d jobs=%d: index %d done %d times", tc.n, tc.jobs, i, c)
			}
		}
		if tc.jobs > 0 && most > int64(tc.jobs) {
			t.Errorf("n=%d jobs=%d: %d calls at once", tc.n, tc.jobs, most)
		}
		// Each success is counted once: the counts are 1..n in some order.
		seen := make([]bool, tc.n+1)
		for _, d := range progress {
			if d < 1 || d > tc.n || seen[d] {
				t.Fatalf("n=%d jobs=%d: progress counts %v", tc.n, tc.jobs, progress)
			}
			seen[d] = true
		}
		if len(progress) != tc.n {
			t.Errorf("n=%d jobs=%d: %d progress calls", tc.n, tc.jobs, len(progress))
		}
	}
}

// The first failure stops the pool: no index is handed out after it, and
// it is what Parallel returns.
func TestParallelStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int64
	err := harness.Parallel(t.Context(), 1000, 1, func(i int) error {
		calls.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	}, nil)
	if !errors.Is(err, boom) || calls.Load() != 4 {
		t.Fatalf("Parallel = %v after %d calls, want boom after 4", err, calls.Load())
	}
}

// An ended context stops the pool and is the error, not the calls'
// failures it caused.
func TestParallelCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int64
	var mu sync.Mutex // the fifth call counts and cancels as one step
	err := harness.Parallel(ctx, 1000, 2, func(i int) error {
		mu.Lock()
		if calls.Add(1) == 5 {
			cancel()
		}
		mu.Unlock()
		if ctx.Err() != nil {
			return errors.New("interrupted: " + ctx.Err().Error())
		}
		return nil
	}, nil)
	if !errors.Is(err, context.Canceled) || calls.Load() > 6 {
		t.Fatalf("Parallel = %v after %d calls, want context.Canceled after at most 6", err, calls.Load())
	}
	cancel()
	if err := harness.Parallel(ctx, 0, 2, func(int) error { return nil }, nil); err != nil {
		t.Errorf("Parallel of nothing on an ended context = %v, want nil: nothing was left undone", err)
	}
}
