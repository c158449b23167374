package virtualtest

import (
	"maps"
	"slices"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// Commands counts the commands sent to miniredis servers, by name: what
// a lock asks of Redis, its scripts' calls included (miniredis runs each
// redis.call of a script as a command of its own). Safe for concurrent
// use; its zero value is ready.
type Commands struct {
	mu      sync.Mutex
	n       map[string]int
	missing map[string]bool // names miniredis answers "unknown command"
}

// counting are the Config.Commands of the runs under way, by their
// bubble's *testing.T, which Miniredis reads.
var counting sync.Map

// count counts the commands m is sent, until it is closed (a restart's
// new server is not counted).
func (c *Commands) count(m *miniredis.Miniredis) {
	// A miniredis reached only through Dial starts its server at the
	// first; the hook is set on the server.
	if conn, err := m.Dial(); err == nil {
		conn.Close()
	}
	srv := m.Server()
	srv.SetPreHook(func(_ *server.Peer, cmd string, _ ...string) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.n == nil {
			c.n, c.missing = map[string]int{}, map[string]bool{}
		}
		c.n[cmd]++
		if !srv.IsRegisteredCommand(cmd) {
			c.missing[cmd] = true
		}
		return false // the command runs as it would have
	})
}

// Names are the commands sent, sorted.
func (c *Commands) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.n))
}

// Count is how many times cmd was sent.
func (c *Commands) Count(cmd string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[cmd]
}

// Unimplemented are the commands sent that miniredis does not implement
// (it answers them "unknown command"), sorted.
func (c *Commands) Unimplemented() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.missing))
}
