package procdriver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// ChildArg is the hidden subcommand that makes a process a child.
const ChildArg = "__agent"

// childConfig is what a child is told, as the first line of its stdin.
// The second is the run's start (writeStart); after it, each line lets a
// stalled agent go on.
type childConfig struct {
	Header   history.Header `json:"header"`
	Scenario spec.Scenario  `json:"scenario"` // as the run plays it (scaled)
	Mode     history.Mode   `json:"mode"`
	Agent    int            `json:"agent"`
	// Life counts the agent's processes before this one: a restarted agent
	// draws from a seed of its own, so that its requests are new ones.
	Life     int  `json:"life"`
	Scripted bool `json:"scripted"`

	Endpoints []string `json:"etcd_endpoints"`
	Prefix    string   `json:"etcd_prefix"`
	Store     string   `json:"store"`      // realtime.StoreSQLite or StoreEtcd
	SQLiteDir string   `json:"sqlite_dir"` // StoreSQLite
}

// After the config, once the child has written its header (it is ready),
// the parent sends the run's start on the wall clock, in Unix nanoseconds,
// on a line of its own: once every process is ready, so that the run's
// duration does not include starting them.

func writeStart(w io.Writer, start time.Time) error {
	_, err := fmt.Fprintf(w, "%d\n", start.UnixNano())
	return err
}

func readStart(r *bufio.Reader) (time.Time, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return time.Time{}, fmt.Errorf("procdriver: the run's start: %w", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("procdriver: the run's start: %w", err)
	}
	return time.Unix(0, ns), nil
}

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
