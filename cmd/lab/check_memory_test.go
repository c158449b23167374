package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/internal/peakrss"
	"github.com/leasefence/lab/leasefence"
)

// runAsLab, set to 1 in a child's environment, makes the test binary the
// lab command itself (TestMain), so a test can measure a lab process.
const runAsLab = "LAB_TEST_RUN_AS_LAB"

// lab check folds a history as it reads it and keeps no event: checking a
// history ten times as long costs the memory of its lease generations (80
// bytes each) and nothing per event. Each history is checked in a lab
// process of its own, a grandchild of this one (peakrss, so that this
// process's memory is not counted in it), whose peak resident memory (the
// kernel's high-water mark) is compared: were the events kept (450,000 more in the longer history), the
// longer would need over 300 MB more.
func TestCheckMemoryIsFlatInHistoryLength(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory is not the checker's: measured without -race")
	}
	dir := t.TempDir()
	const perGeneration = 20   // events of one generation in the made history
	short, long := 2500, 25000 // generations: 50,000 and 500,000 events
	peak := func(gens int) (mb float64) {
		path := filepath.Join(dir, fmt.Sprintf("h%d.jsonl", gens))
		writeLongHistory(t, path, gens)
		kb, err := peakrss.Of([]string{runAsLab + "=1", "GOGC=10"}, os.Args[0], "check", "--json", path)
		if err != nil {
			t.Fatalf("lab check of %d events: %v", gens*perGeneration, err)
		}
		return float64(kb) / 1024 // kilobytes on Linux
	}
	a, b := peak(short), peak(long)
	t.Logf("peak RSS of lab check: %.1f MB for %d events, %.1f MB for %d", a, short*perGeneration, b, long*perGeneration)
	// The generations alone: 22,500 more, 1.8 MB. The checker runs with
	// GOGC=10 so that the collector's headroom (with the default GOGC,
	// up to the live heap again, and more when the load starves its
	// goroutines) stays out of the difference: measured 1.1-2.4 MB at a
	// load average of 16 on 2 cores. Keeping 16 bytes per event came to
	// 17-18 MB.
	if b-a > 12 {
		t.Fatalf("checking %d events more took %.1f MB more (%.1f against %.1f): the checker keeps something per event",
			(long-short)*perGeneration, b-a, b, a)
	}
}

// A line is never held whole: lab check of a history whose second line is
// one 256 MiB event stops at history.MaxEventLine with the line's error
// (exit 2, naming line 2 and the bound), in the memory of that bound. Held
// whole, the line took 2.1 GB at its peak.
func TestCheckStopsAtALongLine(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory is not the checker's: measured without -race")
	}
	path := filepath.Join(t.TempDir(), "long-line.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h := history.Header{Format: history.FormatVersion, Scenario: "long-line", Seed: 1, Backend: "sim", Modes: []history.Mode{history.Fenced},
		Duration: time.Second, Agents: []string{"agent-1"}, Resources: []string{"res-1"}, TTL: time.Second}
	enc, err := history.NewEncoder(f, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	const lineMB = 256
	fmt.Fprint(f, `{"at_ns":1,"mode":"fenced","kind":"library_error","agent":"agent-1","resource":"res-1","detail":"`)
	mb := []byte(strings.Repeat("x", 1<<20))
	for range lineMB {
		if _, err := f.Write(mb); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Fprint(f, "\"}\n")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	u, err := peakrss.Run([]string{runAsLab + "=1"}, os.Args[0], "check", "--json", path)
	if err != nil {
		t.Fatal(err)
	}
	peak := float64(u.KB) / 1024
	t.Logf("lab check of a %d MiB line: exit %d, peak RSS %.1f MB", lineMB, u.Exit, peak)
	want := fmt.Sprintf("%s:2: bad history: line too long: an event line may be at most %d MiB", path, history.MaxEventLine>>20)
	if u.Exit != exitUsage || !strings.Contains(u.Stderr, want) {
		t.Errorf("exit %d, stderr %.500q: want exit %d and %q", u.Exit, u.Stderr, exitUsage, want)
	}
	// About 35 MB: the runtime and a buffer of the bound. The line held
	// whole is 256 MiB, and far more once decoded.
	if peak > 128 {
		t.Errorf("lab check held %.1f MB at its peak: the long line was read past its bound", peak)
	}
}

// writeLongHistory writes a clean fenced history of gens lease
// generations, 20 events each: the request, the grant, the acquisition,
// five renewals, ten admitted writes, the release by the holder and by the
// coordinator, on 10 agents and 5 resources.
func writeLongHistory(t *testing.T, path string, gens int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	agents, resources := []string{}, []string{}
	for i := range 10 {
		agents = append(agents, fmt.Sprintf("agent-%d", i+1))
	}
	for i := range 5 {
		resources = append(resources, fmt.Sprintf("res-%d", i+1))
	}
	step := 20 * time.Millisecond
	h := history.Header{Format: history.FormatVersion, Scenario: "long", Seed: 1, Backend: "sim", Modes: []history.Mode{history.Fenced},
		Duration: time.Duration(gens) * step, Agents: agents, Resources: resources, TTL: time.Second,
		Clocks: history.Clocks{WithinBudget: true}}
	enc, err := history.NewEncoder(f, h)
	if err != nil {
		t.Fatal(err)
	}
	for i := range gens {
		at := time.Duration(i) * step
		a, r, fence := i%len(agents), i%len(resources), leasefence.Fence(i+1)
		ev := func(k history.Kind, dt time.Duration) history.Event {
			return history.Event{At: at + dt, Mode: history.Fenced, Kind: k, Agent: a, Resource: r, Fence: fence, Other: -1}
		}
		send := ev(history.RequestSent, 0)
		send.Request, send.RequestID, send.Fence = history.RequestAcquire, fmt.Sprintf("acq-%d", i), 0
		grant, acq := ev(history.Granted, time.Millisecond), ev(history.Acquired, time.Millisecond)
		grant.Deadline, acq.Deadline = at+time.Second, at+900*time.Millisecond
		events := []history.Event{send, grant, acq}
		for k := range 5 {
			e := ev(history.Renewed, time.Duration(2+k)*time.Millisecond)
			e.Deadline = at + time.Second
			events = append(events, e)
		}
		for k := range 10 {
			e := ev(history.CommitAdmitted, 7*time.Millisecond+time.Duration(k)*time.Millisecond/2)
			e.RequestID = fmt.Sprintf("w-%d-%d", i, k)
			events = append(events, e)
		}
		done := ev(history.LeaseAbandoned, 13*time.Millisecond)
		done.Outcome = history.OutcomeDone
		events = append(events, done, ev(history.Released, 14*time.Millisecond))
		for j := range events {
			if err := enc.Encode(&events[j]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
