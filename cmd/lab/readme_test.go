package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/leasefence/lab/internal/readmetest"
)

// TestReadmeReport checks the README's sample report is what `lab run gap`
// prints, byte for byte but for the findings and the guide to reading it
// that end every report (the README says so, and docs/contenders.md shows
// the findings); -update rewrites it.
func TestReadmeReport(t *testing.T) {
	var stdout, stderr bytes.Buffer
	a := &app{stdout: &stdout, stderr: &stderr, dashboard: nil}
	if code := a.main(context.Background(), []string{"run", "gap"}); code != exitOK {
		t.Fatalf("lab run gap: exit %d\n%s", code, stderr.String())
	}
	var kept []string
	for _, block := range strings.Split(stdout.String(), "\n\n") {
		if !strings.HasPrefix(block, "How to read this:") && !strings.HasPrefix(block, "Findings (") {
			kept = append(kept, block)
		}
	}
	if len(kept) != len(strings.Split(stdout.String(), "\n\n"))-2 {
		t.Fatalf("lab run gap: no paragraphs \"Findings (\" and \"How to read this:\" to cut from the README's capture:\n%s", stdout.String())
	}
	readmetest.Check(t, "lab run gap", strings.Join(kept, "\n\n"), *update)
}

// TestDocsValues checks the counts the guides quote in prose ("24 refused
// commits") against the runs they name; -update rewrites them. The values
// are named lab.<scenario>.<counter> of the fenced mode.
func TestDocsValues(t *testing.T) {
	values := map[string]string{}
	for _, sc := range []string{"overlap", "restart-lost"} {
		modes := labModes(t, "run", sc, "--json")
		for _, counter := range []string{"commits_refused", "refused_overlaps"} {
			values["lab."+sc+"."+counter] = counterOf(t, modes, "fenced", counter)
		}
	}
	readmetest.CheckValues(t, "lab.", values, *update)
}

// TestReadmeContenders checks the comparison of contenders in the README
// and docs/contenders.md: the table, the verdicts and the findings of lab check on a recorded run of the
// redis-locks-paused-holder fixture (redsync, redislock and the fenced
// lease, the real libraries on real redis-servers), the counterexamples
// and the guide to reading cut, and the counts the README quotes from it;
// -update rewrites them.
func TestReadmeContenders(t *testing.T) {
	var stdout, stderr bytes.Buffer
	a := &app{stdout: &stdout, stderr: &stderr, dashboard: nil}
	const file = "cmd/lab/testdata/redis-locks-paused-holder.jsonl"
	if code := a.main(context.Background(), []string{"check", strings.TrimPrefix(file, "cmd/lab/")}); code != exitOK {
		t.Fatalf("lab check %s: exit %d\n%s", file, code, stderr.String())
	}
	var kept []string
	for _, block := range strings.Split(stdout.String(), "\n\n") {
		first := strings.SplitN(block, "\n", 2)[0]
		if len(kept) < 2 || strings.HasPrefix(strings.ToLower(first), "verdict") || strings.Contains(first, "(github.com/") ||
			strings.HasPrefix(first, "Findings") {
			kept = append(kept, block)
		}
	}
	readmetest.Check(t, "lab check "+file, strings.Join(kept, "\n\n")+"\n", *update)

	// The README quotes the run's counts in prose: values check.<contender>.<counter>.
	modes := labModes(t, "check", strings.TrimPrefix(file, "cmd/lab/"), "--json")
	values := map[string]string{}
	for _, q := range []struct{ contender, counter string }{
		{"redsync", "stale_writes_landed"},
		{"redislock", "stale_writes_landed"},
		{"fenced", "commits_refused"},
	} {
		values["check."+q.contender+"."+q.counter] = counterOf(t, modes, q.contender, q.counter)
	}
	readmetest.CheckValues(t, "check.", values, *update)
}

// labModes runs lab with args, a --json run or check, and returns its
// report's counters by mode and name.
func labModes(t *testing.T, args ...string) map[string]map[string]any {
	t.Helper()
	var stdout, stderr bytes.Buffer
	a := &app{stdout: &stdout, stderr: &stderr, dashboard: nil}
	if code := a.main(context.Background(), args); code != exitOK {
		t.Fatalf("lab %s: exit %d\n%s", strings.Join(args, " "), code, stderr.String())
	}
	var report struct {
		Modes map[string]map[string]any `json:"modes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("lab %s: %v", strings.Join(args, " "), err)
	}
	return report.Modes
}

// counterOf is a numeric counter of mode in modes, as the docs print it.
func counterOf(t *testing.T, modes map[string]map[string]any, mode, counter string) string {
	t.Helper()
	v, ok := modes[mode][counter].(float64)
	if !ok {
		t.Fatalf("no %s counter %s among %d modes", mode, counter, len(modes))
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// TestReadmeContendersList checks the list of contenders docs/contenders.md
// shows is what `lab contenders` prints, the versions linked into this
// binary included; -update rewrites it.
func TestReadmeContendersList(t *testing.T) {
	var stdout, stderr bytes.Buffer
	a := &app{stdout: &stdout, stderr: &stderr, dashboard: nil}
	if code := a.main(context.Background(), []string{"contenders"}); code != exitOK {
		t.Fatalf("lab contenders: exit %d\n%s", code, stderr.String())
	}
	readmetest.Check(t, "lab contenders", stdout.String(), *update)
}
