package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/scaling.svg from testdata/bench.txt")

// TestGolden draws testdata/bench.txt (real output of the simulator
// benchmarks at GOMAXPROCS 2 and 1, with a line of another benchmark and
// the go test chatter around them) and compares it with the SVG it drew
// last time; -update rewrites it after a deliberate change.
func TestGolden(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{filepath.Join("testdata", "bench.txt")}, nil, &out); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "scaling.svg")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("the SVG differs from %s (run with -update if the change is intended):\n%s", golden, out.String())
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, line string
		want       *result // nil: not a result
	}{
		{"procs suffix", "BenchmarkSimulatorAgents/agents=10/resources=1-2  1  611532899 ns/op  3323694 events/s",
			&result{name: "BenchmarkSimulatorAgents/agents=10/resources=1", procs: 2,
				params:  map[string]string{"agents": "10", "resources": "1"},
				metrics: map[string]float64{"ns/op": 611532899, "events/s": 3323694}}},
		{"no suffix at GOMAXPROCS 1", "BenchmarkSimulatorAgents/agents=10/resources=1  1  5 ns/op",
			&result{name: "BenchmarkSimulatorAgents/agents=10/resources=1", procs: 1,
				params:  map[string]string{"agents": "10", "resources": "1"},
				metrics: map[string]float64{"ns/op": 5}}},
		{"hyphen in a name", "BenchmarkCoordinator/op=acquire-held/impl=map  10  59.5 ns/op",
			&result{name: "BenchmarkCoordinator/op=acquire-held/impl=map", procs: 1,
				params:  map[string]string{"op": "acquire-held", "impl": "map"},
				metrics: map[string]float64{"ns/op": 59.5}}},
		{"name alone", "BenchmarkSimulatorAgents/agents=10/resources=1", nil},
		{"log line", "BenchmarkX    bench_test.go:12: something", nil},
		{"header", "cpu: AMD EPYC", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(strings.NewReader(tt.line))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if len(got) != 0 {
					t.Fatalf("parse(%q) = %+v, want no result", tt.line, got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("parse(%q) = %+v, want one result", tt.line, got)
			}
			g := got[0]
			if g.name != tt.want.name || g.procs != tt.want.procs || !equalMaps(g.params, tt.want.params) || !equalMaps(g.metrics, tt.want.metrics) {
				t.Errorf("parse(%q) = %+v, want %+v", tt.line, g, *tt.want)
			}
		})
	}
}

func equalMaps[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		args []string
		want string // in the error
	}{
		{"two files", []string{"a", "b"}, "at most one argument"},
		{"missing file", []string{filepath.Join(dir, "nope.txt")}, "nope.txt"},
		{"no simulator results", []string{write("gate.txt", "BenchmarkGateCommit/goroutines=1/impl=gate-2  10  13 ns/op\n")},
			"no results of BenchmarkSimulatorAgents"},
		{"bad number", []string{write("bad.txt", "goos: linux\nBenchmarkSimulatorAgents/agents=10/resources=1-2  1  many ns/op\n")},
			`line 2: "many" is not a number (the value of ns/op)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(tt.args, strings.NewReader(""), &out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tt.args, err, tt.want)
			}
			if out.Len() != 0 {
				t.Errorf("run(%q) wrote %d bytes despite the error", tt.args, out.Len())
			}
		})
	}
}

// TestStdin reads the results from standard input with no argument or "-".
func TestStdin(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "bench.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"-"}} {
		var out bytes.Buffer
		if err := run(args, bytes.NewReader(in), &out); err != nil {
			t.Fatalf("run(%q): %v", args, err)
		}
		if !strings.HasPrefix(out.String(), "<svg ") || !strings.Contains(out.String(), "GOMAXPROCS=1") {
			t.Errorf("run(%q) drew no figure with a GOMAXPROCS=1 line:\n%s", args, out.String())
		}
	}
}
