package procdriver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// ChildArg is the hidden subcommand that makes a process a child.
const ChildArg = "__agent"

// childConfig is what a child is told, as the first line of its stdin.
// After it, each line on the child's stdin lets a stalled agent go on.
type childConfig struct {
	Header   history.Header `json:"header"`
	Scenario spec.Scenario  `json:"scenario"` // as the run plays it (scaled)
	Mode     history.Mode   `json:"mode"`
	Agent    int            `json:"agent"`
	// Life counts the agent's processes before this one: a restarted agent
	// draws from a seed of its own, so that its requests are new ones.
	Life     int   `json:"life"`
	Scripted bool  `json:"scripted"`
	Start    int64 `json:"start_unix_ns"` // the run's start on the wall clock

	Endpoints []string `json:"etcd_endpoints"`
	Prefix    string   `json:"etcd_prefix"`
	Store     string   `json:"store"`      // realtime.StoreSQLite or StoreEtcd
	SQLiteDir string   `json:"sqlite_dir"` // StoreSQLite
}

func (c *childConfig) start() time.Time { return time.Unix(0, c.Start) }

// writeID is the id of an agent's n-th write in its life-th process,
// unique across the run's processes of one mode.
func writeID(agent, life int, n uint64) uint64 {
	return uint64(agent+1)<<40 | uint64(life)<<32 | n
}

func readConfig(r *bufio.Reader) (childConfig, error) {
	var c childConfig
	line, err := r.ReadBytes('\n')
	if err != nil && err != io.EOF {
		return c, fmt.Errorf("procdriver: child config: %w", err)
	}
	if err := json.Unmarshal(line, &c); err != nil {
		return c, fmt.Errorf("procdriver: child config: %w", err)
	}
	return c, nil
}
