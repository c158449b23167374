package history_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// record runs sc in both modes with its history written to a buffer, and
// returns the run's result and the history file.
func record(t *testing.T, sc spec.Scenario) (*history.Result, []byte) {
	t.Helper()
	var buf bytes.Buffer
	enc, err := history.NewEncoder(&buf, sc.Header(harness.Modes))
	if err != nil {
		t.Fatal(err)
	}
	res, err := harness.Run(t.Context(), sc, harness.RunOptions{Subscribers: []history.Subscriber{enc}})
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	return res, buf.Bytes()
}

// checkFile checks a history file as lab check does.
func checkFile(t *testing.T, data []byte) *history.Result {
	t.Helper()
	h, events, err := history.Decode(bytes.NewReader(data), "history.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return history.Check(h, events)
}

// The checker judging the written history gives exactly the run's own
// report, for every built-in over 50 seeds: the run's report is nothing but
// the checker's verdict on what it emitted, and the file loses nothing.
func TestRoundTripEveryBuiltin(t *testing.T) {
	const block = 10 // blocks of seeds share the cores evenly
	seeds := uint64(50)
	if raceEnabled {
		// The simulator is single-threaded and the race detector slows
		// it tenfold: one block of seeds checks the encoder and the
		// checker under it, the plain run all five.
		seeds = block
	}
	for _, name := range spec.BuiltinNames() {
		for first := uint64(1); first <= seeds; first += block {
			t.Run(fmt.Sprintf("%s/seeds=%d-%d", name, first, first+block-1), func(t *testing.T) {
				t.Parallel()
				roundTrip(t, name, first, first+block-1)
			})
		}
	}
}

func roundTrip(t *testing.T, name string, first, last uint64) {
	base, _ := spec.Builtin(name)
	for seed := first; seed <= last; seed++ {
		sc := base
		sc.Seed = seed
		res, data := record(t, sc)
		got := checkFile(t, data)
		if !reflect.DeepEqual(got, res) {
			t.Fatalf("seed %d: lab check differs from lab run:\n run:   %+v\n check: %+v", seed, summary(res), summary(got))
		}
	}
}

func summary(r *history.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s seed %d digest %s events %d", r.Scenario, r.Seed, r.Digest, r.Events)
	for m, rep := range r.Modes {
		fmt.Fprintf(&b, "\n  %s: %+v", m, *rep)
	}
	return b.String()
}

// tamper applies edit to the lines of a history file.
func tamper(t *testing.T, data []byte, edit func(lines []string) bool) []byte {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if !edit(lines) {
		t.Fatal("nothing to tamper with")
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// field returns the raw value of a JSON field in an event line.
func field(line, name string) string {
	i := strings.Index(line, `"`+name+`":`)
	if i < 0 {
		return ""
	}
	v := line[i+len(name)+3:]
	if j := strings.IndexAny(v, ",}"); j >= 0 {
		v = v[:j]
	}
	return v
}

// setField replaces the value of a JSON field in an event line.
func setField(line, name, value string) string {
	old := `"` + name + `":` + field(line, name)
	return strings.Replace(line, old, `"`+name+`":`+value, 1)
}

// A history edited after the fact is caught by the checker alone.
func TestTamperedHistoriesAreCaught(t *testing.T) {
	gap, _ := spec.Builtin("gap")
	crowd, _ := spec.Builtin("crowd")
	for _, tc := range []struct {
		name  string
		sc    spec.Scenario
		edit  func(lines []string) bool
		check func(r *history.Report) bool
		want  string
	}{
		{
			name: "a refused commit turned admitted is a stale write landed",
			sc:   gap,
			edit: func(lines []string) bool {
				for i, l := range lines {
					if strings.Contains(l, `"kind":"commit_refused"`) {
						lines[i] = strings.Replace(l, `"kind":"commit_refused"`, `"kind":"commit_admitted"`, 1)
						return true
					}
				}
				return false
			},
			check: func(r *history.Report) bool { return r.StaleWritesLanded == 1 },
			want:  "1 stale write landed through the gate",
		},
		{
			name: "two writes swapped land a lower fence after a higher one",
			sc:   crowd,
			edit: func(lines []string) bool {
				// Swap what two admitted commits on one resource say,
				// leaving each line's instant where it was.
				last := map[string]int{}
				for i, l := range lines {
					if !strings.Contains(l, `"mode":"fenced","kind":"commit_admitted"`) {
						continue
					}
					res := field(l, "resource")
					if j, ok := last[res]; ok && field(lines[j], "fence") != field(l, "fence") {
						a, b := lines[j], l
						lines[j] = setField(b, "at_ns", field(a, "at_ns"))
						lines[i] = setField(a, "at_ns", field(b, "at_ns"))
						return true
					}
					last[res] = i
				}
				return false
			},
			check: func(r *history.Report) bool { return r.StaleWritesLanded >= 1 },
			want:  "1 stale write landed through the gate",
		},
		{
			name: "a fence minted again is a fence reuse",
			sc:   gap,
			edit: func(lines []string) bool {
				n := 0
				for i, l := range lines {
					if strings.Contains(l, `"mode":"fenced","kind":"granted"`) {
						if n++; n == 2 {
							lines[i] = setField(l, "fence", "1")
							return true
						}
					}
				}
				return false
			},
			check: func(r *history.Report) bool { return r.FenceReuses == 1 },
			want:  "1 fence reused with no restart that lost the counter",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, data := record(t, tc.sc)
			if res.Failed() {
				t.Fatalf("the untampered run failed: %v", res.Violations())
			}
			got := checkFile(t, tamper(t, data, tc.edit))
			f := got.Modes[history.Fenced]
			if !got.Failed() || !tc.check(f) || !strings.Contains(strings.Join(f.Violations, "; "), tc.want) {
				t.Fatalf("not caught: violations %q, report %+v", f.Violations, *f)
			}
			if got.Digest == res.Digest {
				t.Error("the tampered history has the run's digest")
			}
		})
	}
}
