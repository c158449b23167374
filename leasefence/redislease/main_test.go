package redislease_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// rdb is the Redis at LEASEFENCE_REDIS_URL that the tests share, each under
// a prefix of its own (newPrefix); nil when none answers, and then every
// test that needs it skips, saying why (noRedis).
var (
	rdb     *redis.Client
	noRedis string
)

func TestMain(m *testing.M) {
	url := os.Getenv("LEASEFENCE_REDIS_URL")
	if url == "" {
		noRedis = "LEASEFENCE_REDIS_URL is unset: start a throwaway Redis with scripts/redis.sh start, then eval \"$(scripts/redis.sh env)\""
		code := m.Run()
		closeDeployment()
		os.Exit(code)
	}
	c, err := connect(url)
	if err != nil {
		noRedis = fmt.Sprintf("no Redis answers at LEASEFENCE_REDIS_URL=%s (%v): start one with scripts/redis.sh start", url, err)
		code := m.Run()
		closeDeployment()
		os.Exit(code)
	}
	rdb = c
	code := m.Run()
	rdb.Close()
	closeDeployment()
	os.Exit(code)
}

// connect opens a client on url and checks that Redis answers.
func connect(url string) (*redis.Client, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	c := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// needRedis returns the shared client, or skips t when there is none.
func needRedis(tb testing.TB) *redis.Client {
	tb.Helper()
	if rdb == nil {
		tb.Skip(noRedis)
	}
	return rdb
}

var (
	runID    = time.Now().UnixNano()
	prefixes atomic.Int64
)

// newPrefix is a key prefix no other test (of this run or an earlier one
// on the same server) uses; its keys are deleted when tb ends.
func newPrefix(tb testing.TB) string {
	p := fmt.Sprintf("test-%d-%d:", runID, prefixes.Add(1))
	tb.Cleanup(func() { deleteKeys(rdb, "{"+p+"}*") })
	return p
}

// deleteKeys deletes the keys that match pattern, best effort.
func deleteKeys(c *redis.Client, pattern string) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, strings.ReplaceAll(pattern, "{", `\{`), 500).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
