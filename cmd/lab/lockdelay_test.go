package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasefence/lab/history"
)

// lockDelayScript is one 1s lease left to expire: agent-1 takes it at 0
// and never renews it; agent-2 asks at 2s, and again at 5s. Under a
// lock-delay of 3s the first ask is refused for lock-delay and the
// resource sits idle until the second, about 3s: each instant a second
// from the bounds it is judged by.
const lockDelayScript = `name: lock-delay-script
agents: 2
resources: 1
ttl: 1s
seed: 1
duration: 5500ms
agent:
  writes_per_lease: 1
script:
  - {at: 0ms, agent: agent-1, do: acquire}
  - {at: 2s, agent: agent-2, do: acquire}
  - {at: 5s, agent: agent-2, do: acquire}
`

// lab run --lock-delays runs the sweep on a real backend too, each delay
// a real-time run of its own: with no delay the resource is never idle,
// with 3s it sits idle about 3s in each mode.
func TestLockDelaySweepOnABackend(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 11s")
	}
	file := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(file, []byte(lockDelayScript), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runLab("run", file, "--lock-delays", "0,3s", "--backend", "memory", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Backend string                 `json:"backend"`
		Rows    []history.LockDelayRow `json:"rows"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if out.Backend != "memory" || len(out.Rows) != 2 {
		t.Fatalf("backend %q, %d rows, want memory and 2: %s", out.Backend, len(out.Rows), stdout)
	}
	for _, m := range []history.Mode{history.Naive, history.Fenced} {
		none, delayed := out.Rows[0].Modes[m].IdleWhileWaitingMS, out.Rows[1].Modes[m].IdleWhileWaitingMS
		if none != 0 || delayed < 2000 || delayed > 4000 {
			t.Errorf("%s: idle %dms with no lock-delay and %dms with 3s, want 0 and about 3000", m, none, delayed)
		}
	}
}
