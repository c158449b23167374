package procdriver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
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

	// Backend and Store name the run's backend and store (registry
	// names), and their shares say how to reach them (realtime.Share).
	Backend      string `json:"backend"`
	BackendShare string `json:"backend_share"`
	Store        string `json:"store"`
	StoreShare   string `json:"store_share"`
	// ContenderShare, for a mode that is a library's contender, says how
	// to reach its servers; its lock is the mode's coordinator.
	ContenderShare string `json:"contender_share,omitempty"`
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

// idLayout is how a write id is cut into the agent (plus one, so that no
// id is 0), the agent's process (its life: 0, then one more for each
// crash of that agent the scenario plays) and the write's number in that
// process (from 1): the fewest bits that hold the run's agents and lives,
// and every bit left for the writes. Ids are unique across the run's
// processes of one mode by construction: no field can spill into another.
type idLayout struct {
	lifeBits, writeBits uint
}

// minWriteBits is the fewest bits a layout may leave for a process's
// writes: 2^40 writes, one a microsecond, take 12 days, and no run lasts
// longer than spec.MaxDuration (a day).
const minWriteBits = 40

func newIDLayout(sc spec.Scenario) idLayout {
	crashes := make(map[string]int, len(sc.Crashes))
	lives := 0 // the most lives after the first of one agent
	for _, c := range sc.Crashes {
		crashes[c.Agent]++
		lives = max(lives, crashes[c.Agent])
	}
	agentBits, lifeBits := uint(bits.Len(uint(sc.Agents))), uint(bits.Len(uint(lives)))
	return idLayout{lifeBits: lifeBits, writeBits: 64 - min(64, agentBits+lifeBits)}
}

// check refuses a layout that leaves fewer than minWriteBits for the
// writes.
func (l idLayout) check(sc spec.Scenario) error {
	if l.writeBits < minWriteBits {
		return fmt.Errorf("%w: write ids: %d agents and %d lives of one agent leave %d bits for a process's writes, fewer than %d",
			ErrCannotPlay, sc.Agents, 1<<l.lifeBits-1, l.writeBits, minWriteBits)
	}
	return nil
}

// id is the id of an agent's n-th write (from 1) in its life-th process;
// false if the layout cannot hold it.
func (l idLayout) id(agent, life int, n uint64) (uint64, bool) {
	if agent < 0 || life < 0 || uint64(life) >= 1<<l.lifeBits || n == 0 || n >= 1<<l.writeBits {
		return 0, false
	}
	a := uint64(agent + 1)
	if l.lifeBits+l.writeBits < 64 && a >= 1<<(64-l.lifeBits-l.writeBits) {
		return 0, false
	}
	return a<<(l.lifeBits+l.writeBits) | uint64(life)<<l.writeBits | n, true
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
