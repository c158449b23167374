package sqllease_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
	"github.com/leasefence/lab/leasefence/sqllease"
	"github.com/leasefence/lab/leasefence/tests/internal/sqltest"
)

// contend has acquirers goroutines, spread over the coordinators, take
// and release one resource grants times each, and returns the first
// double grant it sees (a grant while another lease is live and
// unreleased, or a lease superseded before its release), a fence that does
// not rise, or an error. Leases last far longer than the run, so only a
// release frees the resource.
func contend(ctx context.Context, coords []*sqllease.Coordinator, acquirers, grants int) error {
	_, err := contendFences(ctx, coords, acquirers, grants)
	return err
}

// contendFences is contend, which also returns the fences it granted.
func contendFences(ctx context.Context, coords []*sqllease.Coordinator, acquirers, grants int) ([]leasefence.Fence, error) {
	var (
		live    atomic.Int64 // leases granted and not yet released
		mu      sync.Mutex
		last    leasefence.Fence
		fences  []leasefence.Fence
		first   error
		wg      sync.WaitGroup
		failed  = make(chan struct{})
		failure sync.Once
	)
	fail := func(err error) {
		failure.Do(func() { first = err; close(failed) })
	}
	for i := range acquirers {
		wg.Go(func() {
			svc := coords[i%len(coords)]
			holder := fmt.Sprintf("agent-%d-%d", os.Getpid(), i) // unique across processes too
			c, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock(leasefence.Domain(holder)), Holder: holder})
			if err != nil {
				fail(err)
				return
			}
			for got := 0; got < grants; {
				select {
				case <-failed:
					return
				default:
				}
				req, err := c.BeginAcquire("hot")
				if err != nil {
					fail(err)
					return
				}
				out, err := svc.Acquire(ctx, req)
				if err != nil {
					fail(err)
					return
				}
				if !out.OK {
					if out.Reason != leasefence.ReasonHeld {
						fail(fmt.Errorf("%s refused with %+v, want held", holder, out))
						return
					}
					continue
				}
				got++
				tok := out.Grant.Token
				if n := live.Add(1); n != 1 {
					fail(fmt.Errorf("double grant: %v granted while %d other leases are live", tok, n-1))
					return
				}
				mu.Lock()
				if tok.Fence <= last {
					err = fmt.Errorf("fence %d granted after %d", tok.Fence, last)
				}
				last = tok.Fence
				fences = append(fences, tok.Fence)
				mu.Unlock()
				if err != nil {
					fail(err)
					return
				}
				live.Add(-1) // before the release: once it lands, another may be granted
				rel, err := svc.Release(ctx, tok)
				switch {
				case err != nil:
					fail(fmt.Errorf("release %v: %w", tok, err))
					return
				case rel.Reason == leasefence.ReasonSuperseded:
					// Nothing but its release ends this lease: another
					// grant was made while it was live.
					fail(fmt.Errorf("double grant: %v was superseded while live and unreleased", tok))
					return
				case !rel.OK:
					fail(fmt.Errorf("release %v = %+v", tok, rel))
					return
				}
			}
		})
	}
	wg.Wait()
	return fences, first
}

// TestConcurrentAcquirers: sixteen goroutines on four handles (four
// processes) take and release one resource, 10 grants each, under
// PostgreSQL's default READ COMMITTED and on one SQLite file: never two
// live holders, fences always rising.
func TestConcurrentAcquirers(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, d database) {
		opts := sqllease.Options{TTL: time.Minute}
		var coords []*sqllease.Coordinator
		for range 4 {
			coords = append(coords, newCoordinator(t, d.handle(t), opts))
		}
		if err := contend(t.Context(), coords, 16, 10); err != nil {
			t.Fatal(err)
		}
	})
}

// TestConcurrentAcquirersCatchAMissingRowLock: the same contention on a
// coordinator whose acquire reads the resource's row without locking it
// (the FOR UPDATE taken out of its statements by the driver) and then
// writes what it read: a read-then-write. contend must see the double
// grant, as such or as its trace: two grants made at once and seen in the
// other order, the higher fence counted and let go before the lower one
// is seen, which contend reports as a fence that does not rise (the
// coordinator with the row lock shows neither). The driver waits a
// little after each unlocked read, so that concurrent acquirers all read
// before any writes, every run.
func TestConcurrentAcquirersCatchAMissingRowLock(t *testing.T) {
	coords := unlockedCoordinators(t, 4)
	err := contend(t.Context(), coords, 16, 20)
	if err == nil || !strings.Contains(err.Error(), "double grant") && !strings.Contains(err.Error(), "granted after") {
		t.Fatalf("contend on a coordinator without the row lock = %v, want a double grant", err)
	}
	t.Logf("caught: %v", err)
}

// TestConformanceCatchesAMissingRowLock runs leasetest's suite on the
// coordinator without the row lock, in a child process (the suite fails
// the test it runs in), and requires its subtest of concurrent acquirers
// to fail, saying so.
func TestConformanceCatchesAMissingRowLock(t *testing.T) {
	sqltest.PGConfig(t) // skips without PostgreSQL
	if os.Getenv("SQLLEASE_UNLOCKED_SUITE") != "" {
		leasetest.TestService(t, func(tb testing.TB) leasetest.Harness {
			return leasetest.Harness{Service: unlockedCoordinators(tb, 2)[0], TTL: testTTL, Elapse: time.Sleep, Settle: 20 * time.Millisecond}
		})
		return
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestConformanceCatchesAMissingRowLock$/OneLiveHolder", "-test.v")
	cmd.Env = append(os.Environ(), "SQLLEASE_UNLOCKED_SUITE=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "two live holders") {
		t.Fatalf("the suite on a coordinator without the row lock: %v\n%s\nwant it to fail with two live holders", err, out)
	}
}

// unlockedCoordinators makes n coordinators on n handles of one
// PostgreSQL database whose driver takes FOR UPDATE out of every
// statement and waits 20ms after each read it changed.
func unlockedCoordinators(t testing.TB, n int) []*sqllease.Coordinator {
	d := openPostgres(t).(*postgresDB)
	opts := sqllease.Options{TTL: time.Minute, Dialect: sqllease.Postgres}
	var coords []*sqllease.Coordinator
	for range n {
		db := d.hooked(t, func(q string) (string, func(), error) {
			unlocked, found := strings.CutSuffix(q, " FOR UPDATE")
			if !found {
				return q, nil, nil
			}
			return unlocked, func() { time.Sleep(20 * time.Millisecond) }, nil
		})
		coords = append(coords, newCoordinator(t, db, opts))
	}
	return coords
}
