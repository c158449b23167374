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
// prints, byte for byte; -update rewrites it.
func TestReadmeReport(t *testing.T) {
	var stdout, stderr bytes.Buffer
	a := &app{stdout: &stdout, stderr: &stderr, dashboard: nil}
	if code := a.main(context.Background(), []string{"run", "gap"}); code != exitOK {
		t.Fatalf("lab run gap: exit %d\n%s", code, stderr.String())
	}
	readmetest.Check(t, "lab run gap", stdout.String(), *update)
}

// TestDocsValues checks the counts the guides quote in prose ("24 refused
// commits") against the runs they name; -update rewrites them. The values
// are named lab.<scenario>.<counter> of the fenced mode.
func TestDocsValues(t *testing.T) {
	values := map[string]string{}
	for _, sc := range []string{"overlap", "restart-lost"} {
		var stdout, stderr bytes.Buffer
		a := &app{stdout: &stdout, stderr: &stderr, dashboard: nil}
		if code := a.main(context.Background(), []string{"run", sc, "--json"}); code != exitOK {
			t.Fatalf("lab run %s --json: exit %d\n%s", sc, code, stderr.String())
		}
		var run struct {
			Modes map[string]map[string]any `json:"modes"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &run); err != nil {
			t.Fatal(err)
		}
		for _, counter := range []string{"commits_refused", "refused_overlaps"} {
			v, ok := run.Modes["fenced"][counter].(float64)
			if !ok {
				t.Fatalf("lab run %s --json: no fenced %s", sc, counter)
			}
			values["lab."+sc+"."+counter] = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	readmetest.CheckValues(t, "lab.", values, *update)
}

// TestReadmeContenders checks the README's comparison of contenders: the
// table and the verdicts of lab check on a recorded run of the
// redis-locks-paused-holder fixture (redsync, redislock and the fenced
// lease, the real libraries on real redis-servers), the counterexamples
// and the guide to reading cut; -update rewrites it.
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
		if len(kept) < 2 || strings.HasPrefix(strings.ToLower(first), "verdict") || strings.Contains(first, "(github.com/") {
			kept = append(kept, block)
		}
	}
	readmetest.Check(t, "lab check "+file, strings.Join(kept, "\n\n")+"\n", *update)
}
