package redislease_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/leasefence/lab/leasefence/redislease"
)

// dataKey finds a key that documentation or an example writes through a
// gate: pipe.<Command>(ctx, "<key>", ...).
var dataKey = regexp.MustCompile(`pipe\.[A-Z]\w*\(ctx,\s*"([^"]*)"`)

// On Redis Cluster a gate's Commit runs its commands in the gate's
// MULTI/EXEC, so the data keys must hash to the gate's slot: every key the
// package's documentation and examples write carries the default prefix's
// hash tag, "{leasefence:}", and none is spelled another way. The examples
// are what users copy.
func TestExamplesWriteInTheGatesHashSlot(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]int{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") && !strings.HasPrefix(f, "example") {
			continue // tests choose prefixes of their own
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(f, "example") && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue // outside examples, only doc comments show users keys
			}
			for _, m := range dataKey.FindAllStringSubmatch(line, -1) {
				found[f]++
				if tag := hashTag(m[1]); tag != redislease.DefaultPrefix {
					t.Errorf("%s:%d writes %q, whose hash tag is %q: want %q, the gate's, so that it shares the gate's slot on a cluster", f, i+1, m[1], tag, "{"+redislease.DefaultPrefix+"}")
				}
			}
		}
	}
	// The places that show a write today; one that stops matching the
	// pattern must be looked at, not silently skipped.
	for _, f := range []string{"doc.go", "lock.go", "example_test.go", "example_lock_test.go", "example_failover_test.go"} {
		if found[f] == 0 {
			t.Errorf("%s shows no write through a gate that this test recognises (pipe.<Command>(ctx, \"<key>\"...)); found %v", f, found)
		}
	}
}
