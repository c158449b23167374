package scenario_test

import (
	"strings"
	"testing"

	"github.com/leasefence/lab/scenario"
)

// A fixture's resource key names where a real backend keeps its gates, on
// Redis too; a resource with no backend runs on memory, and an unknown
// store is named.
func TestFixtureResourceOnRedis(t *testing.T) {
	const body = "scenario: {builtin: overlap}\nexpect: {fenced: {stale_writes_landed: 0}}\n"
	for _, tc := range []struct {
		head, want, err string
	}{
		{"backend: redis\nresource: sqlite\n", "sqlite", ""},
		{"backend: redis\n", "", ""},
		{"resource: sqlite\n", "sqlite", ""},
		{"backend: redis\nresource: zookeeper\n", "", `must be memory, sqlite, etcd, http, redis, postgres, got "zookeeper"`},
	} {
		fx, err := scenario.ParseFixture("f.yaml", []byte(tc.head+body))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.head, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.head, err)
		case fx.Resource != tc.want:
			t.Errorf("%q: resource %q, want %q", tc.head, fx.Resource, tc.want)
		}
	}
}
