package leasefence_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
)

// wantDomainError asserts that err is a *ClockDomainError between left and
// right that also answers errors.Is(ErrClockDomain).
func wantDomainError(t *testing.T, err error, left, right leasefence.Domain) {
	t.Helper()
	var de *leasefence.ClockDomainError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v (%T), want *ClockDomainError", err, err)
	}
	if de.Left != left || de.Right != right {
		t.Errorf("ClockDomainError{Left: %q, Right: %q}, want {%q, %q}", de.Left, de.Right, left, right)
	}
	if !errors.Is(err, leasefence.ErrClockDomain) {
		t.Errorf("errors.Is(%v, ErrClockDomain) = false", err)
	}
	if errors.Is(err, leasefence.ErrClockBackwards) {
		t.Errorf("errors.Is(%v, ErrClockBackwards) = true", err)
	}
}

func TestInstantSubBeforeSameDomain(t *testing.T) {
	a := leasefence.At("agent-a", 1250*time.Millisecond)
	b := leasefence.At("agent-a", 2*time.Second)

	tests := []struct {
		name       string
		i, j       leasefence.Instant
		wantSub    time.Duration
		wantBefore bool
	}{
		{"earlier minus later", a, b, -750 * time.Millisecond, true},
		{"later minus earlier", b, a, 750 * time.Millisecond, false},
		{"equal", a, a, 0, false},
		{"negative offsets", leasefence.At("agent-a", -time.Second), leasefence.At("agent-a", time.Second), -2 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := tt.i.Sub(tt.j)
			if err != nil || d != tt.wantSub {
				t.Errorf("%v.Sub(%v) = %v, %v; want %v, nil", tt.i, tt.j, d, err, tt.wantSub)
			}
			before, err := tt.i.Before(tt.j)
			if err != nil || before != tt.wantBefore {
				t.Errorf("%v.Before(%v) = %v, %v; want %v, nil", tt.i, tt.j, before, err, tt.wantBefore)
			}
		})
	}
}

func TestInstantAcrossDomainsIsAnError(t *testing.T) {
	a := leasefence.At("agent-a", time.Second)
	a2 := leasefence.At("agent-a", 3*time.Second)
	coord := leasefence.At("coordinator", time.Second)
	var zero leasefence.Instant

	tests := []struct {
		name        string
		i, j        leasefence.Instant
		left, right leasefence.Domain
	}{
		{"two domains, same offset", a, coord, "agent-a", "coordinator"},
		{"two domains, reversed", coord, a2, "coordinator", "agent-a"},
		{"zero on the right", a, zero, "agent-a", ""},
		{"zero on the left", zero, a, "", "agent-a"},
		{"both zero", zero, zero, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := tt.i.Sub(tt.j)
			wantDomainError(t, err, tt.left, tt.right)
			if d != 0 {
				t.Errorf("Sub returned %v alongside its error, want 0: never a number shaped like a duration", d)
			}
			before, err := tt.i.Before(tt.j)
			wantDomainError(t, err, tt.left, tt.right)
			if before {
				t.Errorf("Before returned true alongside its error")
			}
		})
	}
}

func TestCoordinatorExpiresAtAgainstHolderDeadline(t *testing.T) {
	coordClock := leasefence.NewManualClock("coordinator", leasefence.WithStart(5*time.Second))
	agentClock := leasefence.NewManualClock("agent-a", leasefence.WithStart(5*time.Second))
	coord := newCoordinator(t, coordClock, time.Second)
	client := newClient(t, agentClock, "agent-a", 0)

	lease, grant := acquireLease(t, client, coord, "r")
	// Same offsets on purpose: the numbers agree, the domains do not.
	if grant.CoordinatorExpiresAt.Offset() != lease.Deadline.Offset() {
		t.Fatalf("setup: offsets %v and %v differ", grant.CoordinatorExpiresAt.Offset(), lease.Deadline.Offset())
	}
	_, err := grant.CoordinatorExpiresAt.Sub(lease.Deadline)
	wantDomainError(t, err, "coordinator", "agent-a")
	_, err = lease.Deadline.Before(grant.CoordinatorExpiresAt)
	wantDomainError(t, err, "agent-a", "coordinator")
}

func TestInstantAddStringDomain(t *testing.T) {
	tests := []struct {
		name string
		i    leasefence.Instant
		want string
	}{
		{"quarter seconds", leasefence.At("agent-a", 0).Add(1250 * time.Millisecond), "agent-a+1.25s"},
		{"origin", leasefence.At("coordinator", 0), "coordinator+0s"},
		{"add twice", leasefence.At("c", time.Second).Add(500 * time.Millisecond).Add(time.Millisecond), "c+1.501s"},
		{"add negative", leasefence.At("c", time.Second).Add(-250 * time.Millisecond), "c+750ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.i.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if tt.i.IsZero() {
				t.Errorf("IsZero() = true for an instant of %q", tt.i.Domain())
			}
		})
	}

	i := leasefence.At("agent-a", time.Second).Add(time.Second)
	if i.Domain() != "agent-a" || i.Offset() != 2*time.Second {
		t.Errorf("Add kept domain %q offset %v, want agent-a 2s", i.Domain(), i.Offset())
	}

	var zero leasefence.Instant
	if !zero.IsZero() || zero.Domain() != "" {
		t.Errorf("zero Instant: IsZero %v, Domain %q", zero.IsZero(), zero.Domain())
	}
	if z := zero.Add(time.Hour); !z.IsZero() {
		t.Errorf("zero.Add(1h) = %v, want the zero Instant (it belongs to no clock)", z)
	}
	if s := zero.String(); strings.Contains(s, "+") {
		t.Errorf("zero.String() = %q, must not look like a reading", s)
	}
}

func TestInstantJSON(t *testing.T) {
	tests := []struct {
		name string
		in   leasefence.Instant
		want string
	}{
		{"reading", leasefence.At("agent-a", 1250*time.Millisecond), `{"domain":"agent-a","ns":1250000000}`},
		{"origin", leasefence.At("coordinator", 0), `{"domain":"coordinator","ns":0}`},
		{"negative", leasefence.At("x", -time.Nanosecond), `{"domain":"x","ns":-1}`},
		{"zero instant", leasefence.Instant{}, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("Marshal = %s, want %s", b, tt.want)
			}
			// Start from a non-zero instant so that decoding null must clear it.
			back := leasefence.At("leftover", time.Hour)
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("Unmarshal(%s): %v", b, err)
			}
			if back != tt.in {
				t.Errorf("round trip = %v, want %v", back, tt.in)
			}
		})
	}
}

func TestInstantJSONInStructs(t *testing.T) {
	req := leasefence.AcquireRequest{RequestID: "id-1", Holder: "agent-a", Resource: "r", SentAt: leasefence.At("agent-a", 1250*time.Millisecond)}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"requestId":"id-1","holder":"agent-a","resource":"r","sentAt":{"domain":"agent-a","ns":1250000000}}`
	if string(b) != want {
		t.Errorf("Marshal(AcquireRequest) = %s\nwant %s", b, want)
	}
	var back leasefence.AcquireRequest
	if err := json.Unmarshal(b, &back); err != nil || back != req {
		t.Errorf("round trip = %+v, %v; want %+v", back, err, req)
	}

	// A refusal carries no grant at all (omitzero), and a grant's durations
	// are integer nanoseconds.
	b, err = json.Marshal(leasefence.AcquireOutcome{Reason: leasefence.ReasonHeld, HeldBy: "agent-b", RetryAfter: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"ok":false,"reason":"held","heldBy":"agent-b","retryAfter":40000000}`; string(b) != want {
		t.Errorf("Marshal(refusal) = %s, want %s", b, want)
	}
	g := leasefence.Grant{
		RequestID: "id-1", Token: leasefence.Token{Resource: "r", Holder: "agent-a", Fence: 7}, TTL: time.Second,
		CoordinatorExpiresAt: leasefence.At("coordinator", 2*time.Second),
	}
	b, err = json.Marshal(leasefence.RenewOutcome{OK: true, Grant: g})
	if err != nil {
		t.Fatal(err)
	}
	want = `{"ok":true,"grant":{"requestId":"id-1","token":{"resource":"r","holder":"agent-a","fence":7},"ttl":1000000000,"coordinatorExpiresAt":{"domain":"coordinator","ns":2000000000}}}`
	if string(b) != want {
		t.Errorf("Marshal(RenewOutcome) = %s\nwant %s", b, want)
	}
	var out leasefence.RenewOutcome
	if err := json.Unmarshal(b, &out); err != nil || out.Grant != g || !out.OK {
		t.Errorf("round trip = %+v, %v", out, err)
	}
}

func TestInstantJSONBad(t *testing.T) {
	for _, in := range []string{
		`{"domain":"","ns":5}`,
		`{"ns":5}`,
		`{}`,
		`"agent-a+1s"`,
		`1250000000`,
		`{"domain":"a","ns":"5"}`,
		`{"domain":7,"ns":5}`,
		`[]`,
		`{"domain":"a","ns":1.5}`,
	} {
		t.Run(in, func(t *testing.T) {
			var i leasefence.Instant
			if err := json.Unmarshal([]byte(in), &i); err == nil {
				t.Errorf("Unmarshal(%s) = %v, nil; want an error", in, i)
			}
		})
	}
}

// steppingSource returns readings one by one; past the end it repeats the
// last one.
func steppingSource(readings ...time.Duration) func() time.Duration {
	n := 0
	return func() time.Duration {
		r := readings[min(n, len(readings)-1)]
		n++
		return r
	}
}

func TestNewClockBackwardsGuard(t *testing.T) {
	c := leasefence.NewClock("host", steppingSource(10, 20, 20, 15, 18, 19, 20, 25, 5, 30))
	if c.Domain() != "host" {
		t.Fatalf("Domain() = %q", c.Domain())
	}
	type step struct {
		want     time.Duration // the reading handed out
		previous time.Duration // for a refusal: the highest reading handed out
		reading  time.Duration // for a refusal: the refused reading
		refused  bool
	}
	steps := []step{
		{want: 10},
		{want: 20},
		{want: 20}, // equal is not backwards
		{refused: true, previous: 20, reading: 15},
		{refused: true, previous: 20, reading: 18}, // still below the highest handed out
		{refused: true, previous: 20, reading: 19},
		{want: 20},
		{want: 25},
		{refused: true, previous: 25, reading: 5},
		{want: 30},
	}
	var highest time.Duration
	for n, s := range steps {
		got, err := c.Now()
		if !s.refused {
			if err != nil || got != leasefence.At("host", s.want) {
				t.Fatalf("read %d = %v, %v; want host+%v", n, got, err, s.want)
			}
			if got.Offset() < highest {
				t.Fatalf("read %d handed out %v, earlier than %v it already gave", n, got, highest)
			}
			highest = got.Offset()
			continue
		}
		var ce *leasefence.ClockError
		if !errors.As(err, &ce) {
			t.Fatalf("read %d = %v, %v; want *ClockError", n, got, err)
		}
		if *ce != (leasefence.ClockError{Domain: "host", Previous: s.previous, Reading: s.reading}) {
			t.Errorf("read %d: ClockError = %+v, want {host %v %v}", n, *ce, s.previous, s.reading)
		}
		if !errors.Is(err, leasefence.ErrClockBackwards) || errors.Is(err, leasefence.ErrClockDomain) {
			t.Errorf("read %d: errors.Is(ErrClockBackwards) false or errors.Is(ErrClockDomain) true: %v", n, err)
		}
		if !got.IsZero() {
			t.Errorf("read %d: refused reading came with instant %v, want the zero Instant", n, got)
		}
	}
}

func TestNewClockSourceReadOncePerNow(t *testing.T) {
	calls := 0
	c := leasefence.NewClock("host", func() time.Duration { calls++; return time.Duration(calls) * time.Second })
	for n := 1; n <= 3; n++ {
		got, err := c.Now()
		if err != nil || got != leasefence.At("host", time.Duration(n)*time.Second) {
			t.Fatalf("read %d = %v, %v", n, got, err)
		}
	}
	if calls != 3 {
		t.Errorf("source called %d times for 3 readings", calls)
	}
}

func TestEmptyDomainPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"NewManualClock", func() { leasefence.NewManualClock("") }},
		{"NewManualClock with options", func() { leasefence.NewManualClock("", leasefence.WithStart(time.Second)) }},
		{"NewMonotonicClock", func() { leasefence.NewMonotonicClock("") }},
		{"NewClock", func() { leasefence.NewClock("", func() time.Duration { return 0 }) }},
		{"At", func() { leasefence.At("", time.Second) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantPanic(t, tt.f)
		})
	}
}

func wantPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if recover() == nil {
			t.Errorf("did not panic")
		}
	}()
	f()
}

func TestManualClock(t *testing.T) {
	type read struct {
		advance time.Duration // before the read
		want    time.Duration
	}
	tests := []struct {
		name  string
		opts  []leasefence.ManualOption
		reads []read
	}{
		{"default starts at zero and stands still", nil, []read{{0, 0}, {0, 0}, {time.Second, time.Second}, {0, time.Second}}},
		{"WithStart", []leasefence.ManualOption{leasefence.WithStart(950 * time.Millisecond)},
			[]read{{0, 950 * time.Millisecond}, {50 * time.Millisecond, time.Second}}},
		{"WithStepPerRead", []leasefence.ManualOption{leasefence.WithStepPerRead(3 * time.Millisecond)},
			[]read{{0, 0}, {0, 3 * time.Millisecond}, {0, 6 * time.Millisecond}, {10 * time.Millisecond, 19 * time.Millisecond}, {0, 22 * time.Millisecond}}},
		{"WithStart and WithStepPerRead", []leasefence.ManualOption{leasefence.WithStart(time.Second), leasefence.WithStepPerRead(time.Millisecond)},
			[]read{{0, time.Second}, {0, time.Second + time.Millisecond}, {0, time.Second + 2*time.Millisecond}}},
		{"options in the other order", []leasefence.ManualOption{leasefence.WithStepPerRead(time.Millisecond), leasefence.WithStart(time.Second)},
			[]read{{0, time.Second}, {0, time.Second + time.Millisecond}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := leasefence.NewManualClock("m", tt.opts...)
			if c.Domain() != "m" {
				t.Fatalf("Domain() = %q", c.Domain())
			}
			for n, r := range tt.reads {
				c.Advance(r.advance)
				got, err := c.Now()
				if err != nil || got != leasefence.At("m", r.want) {
					t.Fatalf("read %d = %v, %v; want m+%v", n, got, err, r.want)
				}
			}
		})
	}
}

func TestManualClockStepPerReadGap(t *testing.T) {
	// Two consecutive reads are exactly the step apart: a check and the
	// write after it never observe the same instant.
	const step = 7 * time.Millisecond
	c := leasefence.NewManualClock("m", leasefence.WithStart(time.Second), leasefence.WithStepPerRead(step))
	prev, _ := c.Now()
	if prev != leasefence.At("m", time.Second) {
		t.Fatalf("first read = %v, want the start m+1s", prev)
	}
	for range 100 {
		next, err := c.Now()
		if err != nil {
			t.Fatal(err)
		}
		if d, err := next.Sub(prev); err != nil || d != step {
			t.Fatalf("consecutive reads %v, %v are %v apart (%v), want %v", prev, next, d, err, step)
		}
		prev = next
	}
}

func TestManualClockPanics(t *testing.T) {
	t.Run("Advance negative", func(t *testing.T) {
		c := leasefence.NewManualClock("m", leasefence.WithStart(time.Second))
		wantPanic(t, func() { c.Advance(-time.Nanosecond) })
		// The clock did not move.
		if got, _ := c.Now(); got != leasefence.At("m", time.Second) {
			t.Errorf("after the refused Advance, Now() = %v, want m+1s", got)
		}
	})
	t.Run("Advance zero is fine", func(t *testing.T) {
		c := leasefence.NewManualClock("m")
		c.Advance(0)
	})
	t.Run("negative step", func(t *testing.T) {
		wantPanic(t, func() { leasefence.NewManualClock("m", leasefence.WithStepPerRead(-time.Millisecond)) })
	})
}

// A manual clock at the end of its range never wraps round to a reading
// in the past: a coordinator on it would find an expired lease live again.
func TestManualClockNeverWraps(t *testing.T) {
	t.Run("Advance", func(t *testing.T) {
		c := leasefence.NewManualClock("m", leasefence.WithStart(math.MaxInt64-time.Second))
		wantPanic(t, func() { c.Advance(2 * time.Second) })
		if got, err := c.Now(); err != nil || got != leasefence.At("m", math.MaxInt64-time.Second) {
			t.Errorf("after the refused Advance, Now() = %v, %v; want the clock where it was", got, err)
		}
		c.Advance(time.Second) // up to the last reading there is
	})
	t.Run("step per read", func(t *testing.T) {
		c := leasefence.NewManualClock("m", leasefence.WithStart(math.MaxInt64-time.Second), leasefence.WithStepPerRead(time.Second))
		for _, want := range []time.Duration{math.MaxInt64 - time.Second, math.MaxInt64} {
			if got, err := c.Now(); err != nil || got != leasefence.At("m", want) {
				t.Fatalf("Now() = %v, %v; want m+%v", got, err, want)
			}
		}
		for range 2 {
			got, err := c.Now()
			var ce *leasefence.ClockError
			if !errors.Is(err, leasefence.ErrClockBackwards) || !errors.As(err, &ce) || !got.IsZero() {
				t.Fatalf("Now() past the end = %v, %v; want a *ClockError", got, err)
			}
		}
		wantPanic(t, func() { c.Advance(time.Nanosecond) })
	})
	t.Run("coordinator", func(t *testing.T) {
		clock := leasefence.NewManualClock("m", leasefence.WithStart(math.MaxInt64/2))
		coord := newCoordinator(t, clock, time.Second)
		client := newClient(t, clock, "a", 0)
		lease, _ := acquireLease(t, client, coord, "r")
		clock.Advance(math.MaxInt64 / 2)
		wantPanic(t, func() { clock.Advance(math.MaxInt64 / 2) })
		req, err := client.BeginRenewal(lease)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := coord.Renew(req); err != nil || out.OK || out.Reason != leasefence.ReasonExpired {
			t.Errorf("Renew of a lease long expired = %+v, %v; want expired", out, err)
		}
	})
}

func TestMonotonicClock(t *testing.T) {
	c := leasefence.NewMonotonicClock("mono")
	if c.Domain() != "mono" {
		t.Fatalf("Domain() = %q", c.Domain())
	}
	prev, err := c.Now()
	if err != nil || prev.Domain() != "mono" || prev.Offset() < 0 {
		t.Fatalf("first read = %v, %v", prev, err)
	}
	for range 1000 {
		next, err := c.Now()
		if err != nil {
			t.Fatal(err)
		}
		if before, err := next.Before(prev); err != nil || before {
			t.Fatalf("monotonic clock went from %v to %v (%v)", prev, next, err)
		}
		prev = next
	}
}

// TestClocksConcurrentReads runs under -race: many goroutines read one clock
// (and advance a manual one) at once.
func TestClocksConcurrentReads(t *testing.T) {
	const goroutines, reads = 8, 500

	t.Run("ManualClock with step", func(t *testing.T) {
		c := leasefence.NewManualClock("m", leasefence.WithStart(time.Second), leasefence.WithStepPerRead(time.Nanosecond))
		seen := make([][]time.Duration, goroutines)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for range reads {
					r, err := c.Now()
					if err != nil {
						t.Error(err)
						return
					}
					seen[g] = append(seen[g], r.Offset())
				}
			})
		}
		wg.Wait()
		// Every reading is handed out exactly once: start, start+1ns, ...
		all := make(map[time.Duration]bool)
		for g := range seen {
			for n, r := range seen[g] {
				if n > 0 && r <= seen[g][n-1] {
					t.Fatalf("goroutine %d read %v after %v", g, r, seen[g][n-1])
				}
				if all[r] {
					t.Fatalf("reading %v handed out twice", r)
				}
				all[r] = true
			}
		}
		if len(all) != goroutines*reads {
			t.Fatalf("%d distinct readings, want %d", len(all), goroutines*reads)
		}
		if last, _ := c.Now(); last.Offset() != time.Second+goroutines*reads*time.Nanosecond {
			t.Errorf("after %d reads Now() = %v", goroutines*reads, last)
		}
	})

	t.Run("ManualClock with Advance", func(t *testing.T) {
		c := leasefence.NewManualClock("m")
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				var prev time.Duration
				for range reads {
					c.Advance(time.Microsecond)
					r, _ := c.Now()
					if r.Offset() < prev {
						t.Errorf("went from %v to %v", prev, r.Offset())
						return
					}
					prev = r.Offset()
				}
			})
		}
		wg.Wait()
		if got, _ := c.Now(); got.Offset() != goroutines*reads*time.Microsecond {
			t.Errorf("Now() = %v after %d advances of 1µs", got, goroutines*reads)
		}
	})

	for name, c := range map[string]leasefence.Clock{
		"MonotonicClock": leasefence.NewMonotonicClock("mono"),
		"NewClock":       leasefence.NewClock("wrapped", counterSource()),
	} {
		t.Run(name, func(t *testing.T) {
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					var prev leasefence.Instant
					for n := range reads {
						r, err := c.Now()
						if err != nil {
							t.Error(err)
							return
						}
						if n > 0 {
							if before, _ := r.Before(prev); before {
								t.Errorf("went from %v to %v", prev, r)
								return
							}
						}
						prev = r
					}
				})
			}
			wg.Wait()
		})
	}
}

// counterSource is a source that moves forward on every call. NewClock calls
// it one call at a time, so it needs no lock of its own.
func counterSource() func() time.Duration {
	var n time.Duration
	return func() time.Duration { n++; return n }
}
