package redisbackend_test

import (
	"os"
	"testing"
	"time"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/internal/runtest"
	"github.com/leasefence/lab/realtime/redisbackend"
)

// On a real Redis, redislease plays the scenario's lock_delay in both
// modes (the naive one on redislease's lease too, the classic lock having
// none): a lease that expired unreleased is followed by a refusal for
// "lock-delay", and the resource sits idle while agent-2 waits.
func TestLockDelayOnRedis(t *testing.T) {
	url := os.Getenv("LEASEFENCE_REDIS_URL")
	if url == "" {
		t.Skip("LEASEFENCE_REDIS_URL is not set (scripts/redis.sh start; eval \"$(scripts/redis.sh env)\")")
	}
	t.Parallel()
	s := redisSetup(t, realtime.Config{Settings: redisbackend.Settings{URL: url}.Entry()}, runtest.LockDelayScript(3*time.Second, 5*time.Second))
	res, file := runtest.RunRecorded(t, s.Scenario, realtime.Options{Backend: s.Backend, Store: s.Store})
	runtest.AssertInvariants(t, res)
	runtest.CheckRoundTrip(t, res, file)
	runtest.CheckLockDelayed(t, res, file, 3*time.Second)
}
