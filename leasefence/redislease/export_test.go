package redislease

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// CheckCmd is the guard of Commit, for the fuzz test that compares it with
// what go-redis sends.
func (g *Gate) CheckCmd(c redis.Cmder) error { return g.checkCmd(c) }

// ReachesAnyKey reports whether the guard refuses the command name as one
// that can reach keys its arguments do not name.
func ReachesAnyKey(name string) bool { return anyKey[strings.ToLower(name)] }
