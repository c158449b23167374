package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestTraceIDsDependOnTheRunOnly: two runs of the same scenario and seed
// send the same trace and span ids, whenever they run; another seed sends
// others.
func TestTraceIDsDependOnTheRunOnly(t *testing.T) {
	ids := func(args ...string) []string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "trace.jsonl")
		a, stdout, stderr := testApp()
		if code := a.main(t.Context(), append([]string{"run", "gap", "--trace", "file=" + path}, args...)); code != exitOK {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range regexp.MustCompile(`"(traceId|spanId)":"([0-9a-f]+)"`).FindAllStringSubmatch(string(b), -1) {
			got = append(got, m[2])
		}
		slices.Sort(got)
		if len(got) == 0 {
			t.Fatalf("no ids in %s:\n%s", path, b)
		}
		return got
	}
	first, second := ids(), ids()
	if !slices.Equal(first, second) {
		t.Errorf("two runs of gap seed 1 sent different ids:\n%v\n%v", first, second)
	}
	if other := ids("--seed", "2"); slices.Equal(first, other) {
		t.Error("seed 2 sent the ids of seed 1")
	}
}
