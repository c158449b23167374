package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leasefence/lab/internal/readmetest"
)

// splitCommand splits a command line lab printed, refusing any quoting:
// the commands these tests reproduce have none.
func splitCommand(t *testing.T, line string) []string {
	t.Helper()
	if strings.ContainsAny(line, `'"\`) {
		t.Fatalf("command %q is quoted", line)
	}
	return strings.Fields(line)
}

func swarmJSON(t *testing.T, args ...string) (map[string]any, []byte) {
	t.Helper()
	code, stdout, stderr := runLab(append([]string{"swarm"}, args...)...)
	if code != exitOK {
		t.Fatalf("lab swarm %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("lab swarm --json: %v\n%s", err, stdout)
	}
	return doc, []byte(stdout)
}

// Each mode's first counterexample names a lab run line that reruns that
// seed exactly, fixed and drawn knobs alike: the same digest.
func TestSwarmFirstCounterexampleReproduces(t *testing.T) {
	for _, args := range [][]string{
		{"overlap", "--seeds", "12", "--duration", "5s", "--json"},
		{"crowd", "--seeds", "6", "--duration", "5s", "--drop-replies", "0.05", "--first-seed", "40", "--json"},
	} {
		doc, _ := swarmJSON(t, args...)
		firsts, _ := doc["first_counterexample"].(map[string]any)
		if _, ok := firsts["fenced"]; !ok {
			t.Fatalf("%v: no fenced entry in %v", args, firsts)
		}
		naive, _ := firsts["naive"].(map[string]any)
		if naive == nil {
			t.Fatalf("%v: no naive counterexample: %v", args, firsts)
		}
		line := splitCommand(t, naive["reproduce"].(string))
		if line[0] != "lab" || line[1] != "run" {
			t.Fatalf("reproduce %v is not a lab run line", line)
		}
		code, stdout, stderr := runLab(append(line[1:], "--json")...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s", line, code, stderr)
		}
		var run struct {
			Seed   float64 `json:"seed"`
			Digest string  `json:"digest"`
			Modes  map[string]struct {
				StaleWritesLanded int `json:"stale_writes_landed"`
			} `json:"modes"`
		}
		if err := json.Unmarshal([]byte(stdout), &run); err != nil {
			t.Fatal(err)
		}
		if run.Seed != naive["seed"] || run.Digest != naive["digest"] || run.Modes["naive"].StaleWritesLanded == 0 {
			t.Errorf("%v: reran seed %v digest %s with %d naive stale writes; the swarm had seed %v digest %v",
				line, run.Seed, run.Digest, run.Modes["naive"].StaleWritesLanded, naive["seed"], naive["digest"])
		}
	}
}

// Shards run with --shard and merged with --merge print what the
// unsharded swarm prints, with the same keys, seed for seed.
func TestSwarmShardsMerge(t *testing.T) {
	base := []string{"overlap", "--seeds", "17", "--duration", "5s", "--first-seed", "3", "--drop-requests", "0.05", "--json"}
	whole, _ := swarmJSON(t, base...)
	dir := t.TempDir()
	var files []string
	for i := range 3 {
		_, out := swarmJSON(t, append(base, "--shard", []string{"0/3", "1/3", "2/3"}[i])...)
		name := filepath.Join(dir, []string{"a.json", "b.json", "c.json"}[i])
		if err := os.WriteFile(name, out, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, name)
	}
	merged, _ := swarmJSON(t, append([]string{"--merge", "--json"}, files[2], files[0], files[1])...)
	if got, want := slices.Sorted(maps.Keys(merged)), slices.Sorted(maps.Keys(whole)); !slices.Equal(got, want) {
		t.Fatalf("merged keys %v, unsharded %v", got, want)
	}
	for _, timed := range []string{"elapsed_ns", "events_per_second", "seeds_per_second"} {
		delete(merged, timed)
		delete(whole, timed)
	}
	for _, doc := range []map[string]any{merged, whole} {
		for _, f := range doc["first_counterexample"].(map[string]any) {
			if f, ok := f.(map[string]any); ok {
				delete(f, "wall_ns")
			}
		}
	}
	g, _ := json.Marshal(merged)
	w, _ := json.Marshal(whole)
	if string(g) != string(w) {
		t.Fatalf("merged:\n%s\nunsharded:\n%s", g, w)
	}
	code, stdout, _ := runLab("swarm", "--merge", files[0], files[1], files[2])
	if code != exitOK || !strings.Contains(stdout, "swarm overlap: seeds 3-19\n") || !strings.Contains(stdout, "  seeds run            17\n") ||
		!strings.Contains(stdout, "  first counterexample\n") {
		t.Fatalf("lab swarm --merge: exit %d\n%s", code, stdout)
	}

	// What does not make one swarm is refused, naming the problem.
	garbage := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(garbage, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	unsharded := filepath.Join(dir, "whole.json")
	_, out := swarmJSON(t, base...)
	if err := os.WriteFile(unsharded, out, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--merge", files[0], files[2]}, "shard 1/3 is missing"},
		{[]string{"--merge", files[0], files[1], files[1], files[2]}, "shard 1/3 is given twice"},
		{[]string{"--merge", files[0], garbage}, "garbage.json is not the output of lab swarm --json"},
		{[]string{"--merge", files[0], unsharded}, "whole.json is the output of a whole swarm, not of a shard"},
		{[]string{"--merge", filepath.Join(dir, "nope.json")}, "nope.json: no such file"},
		{[]string{"--merge"}, "--merge: give the --json output of every shard"},
		{[]string{"--merge", "--seeds", "3", files[0]}, "--merge takes the shards' files and --json only, not --seeds"},
		{[]string{"overlap", "--shard", "3/3"}, `--shard: the index counts from 0 to N-1 (as JOB_COMPLETION_INDEX does), N from 1, got "3/3"`},
		{[]string{"overlap", "--shard", "x"}, `--shard: must be I/N, e.g. 0/4, got "x"`},
		{[]string{"overlap", "--seeds", "2", "--shard", "0/3"}, "--shard: 3 shards of 2 seeds leave some empty"},
	} {
		code, stdout, stderr := runLab(append([]string{"swarm"}, tc.args...)...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("lab swarm %v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// A shard's failure comes through the merge as the unsharded swarm would
// print it: the FAIL line, its reproduce line, and exit status 1.
func TestSwarmMergeKeepsFailures(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for i := range 2 {
		doc, _ := swarmJSON(t, "overlap", "--seeds", "4", "--duration", "5s", "--shard", []string{"0/2", "1/2"}[i], "--json")
		if i == 1 {
			// Seed 2 is shard 1/2's (positions 1 and 3: seeds 2 and 4).
			doc["failures"] = []any{map[string]any{"seed": 2, "violations": []string{"1 stale write landed through the gate"},
				"digest": "0123456789abcdef", "reproduce": "lab run overlap --duration=5s --seed=2 --swarm"}}
		}
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, []string{"a.json", "b.json"}[i])
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, name)
	}
	code, stdout, stderr := runLab("swarm", "--merge", files[0], files[1])
	if code != exitFailed || !strings.Contains(stdout, "FAIL seed 2: 1 stale write landed through the gate\n  reproduce: lab run overlap --duration=5s --seed=2 --swarm\n") ||
		!strings.Contains(stdout, "  fenced failures      1\n") || !strings.Contains(stderr, "BUG IN LEASEFENCE") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
}

// timing matches what a swarm's summary measures on the wall clock: a
// duration, a rate.
var timing = regexp.MustCompile(`\d+(\.\d+)?(ns|µs|ms|s)\b|\(\d+ events/s\)|second     \d+\.\d`)

// TestSwarmDocSample holds docs/swarm.md's sample summary to what its
// command prints now, but for the wall times and rates.
func TestSwarmDocSample(t *testing.T) {
	docs, err := readmetest.Docs()
	if err != nil {
		t.Fatal(err)
	}
	var sample string
	for _, d := range docs {
		if filepath.Base(d.Path) != "swarm.md" {
			continue
		}
		text := string(d.Text)
		_, after, ok := strings.Cut(text, "`lab swarm overlap --seeds 20 --duration 5s` prints")
		_, block, ok2 := strings.Cut(after, "```\n")
		block, _, ok3 := strings.Cut(block, "```\n")
		if !ok || !ok2 || !ok3 {
			t.Fatal("docs/swarm.md has no sample of lab swarm overlap --seeds 20 --duration 5s")
		}
		sample = block
	}
	code, stdout, stderr := runLab("swarm", "overlap", "--seeds", "20", "--duration", "5s")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if got, want := timing.ReplaceAllString(stdout, "T"), timing.ReplaceAllString(sample, "T"); got != want {
		t.Errorf("docs/swarm.md's sample is stale:\n--- docs\n%s--- now\n%s", sample, stdout)
	}
}

// A shard that ran fewer seeds than its share is never merged as complete:
// one that says it was interrupted makes the merge interrupted (exit 130,
// marked in the text and the JSON); one that does not say so is refused.
// The shard files are seeds 1-6 of overlap in two shards; shard 1/2's ran
// none of its three seeds.
func TestSwarmMergeShortShard(t *testing.T) {
	dir := filepath.Join("testdata", "swarm-short")
	whole := filepath.Join(dir, "shard-0-of-2.json")
	for _, tc := range []struct {
		shard, flag string
		code        int
		out, err    string
	}{
		{"shard-1-of-2-short.json", "", exitUsage, "",
			"shard-1-of-2-short.json (shard 1/2) ran 0 of 3 seeds but does not say it was interrupted"},
		{"shard-1-of-2-interrupted.json", "", exitInterrupted, "swarm overlap: seeds 1-6 (INTERRUPTED: 3 of 6 ran)\n",
			"lab swarm: interrupted after 3 of 6 seeds"},
		{"shard-1-of-2-interrupted.json", "--json", exitInterrupted, `"interrupted": true`, "interrupted after 3 of 6 seeds"},
	} {
		args := []string{"swarm", "--merge", whole, filepath.Join(dir, tc.shard)}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		code, stdout, stderr := runLab(args...)
		if code != tc.code || !strings.Contains(stdout, tc.out) || !strings.Contains(stderr, tc.err) {
			t.Errorf("lab %s: exit %d\n%s%s\nwant exit %d, %q and %q", strings.Join(args, " "), code, stdout, stderr, tc.code, tc.out, tc.err)
		}
	}
}
