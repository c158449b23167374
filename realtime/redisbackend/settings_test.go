package redisbackend_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/realtime/redisbackend"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
)

// A fixture's redis key is read into Settings, what lab run takes as
// --redis-topology and the fenced mode's safety flags (registry.Settings); it needs backend redis and a topology the
// lab starts.
func TestFixtureRedis(t *testing.T) {
	const body = "scenario: {builtin: overlap}\nexpect: {fenced: {stale_writes_landed: 0}}\n"
	fx, err := scenario.ParseFixture("f.yaml", []byte("backend: redis\nresource: sqlite\nredis: {topology: sentinel, wait_replicas: 2, wait_timeout: 200ms, watermark: true}\n"+body))
	if err != nil {
		t.Fatal(err)
	}
	want := redisbackend.Settings{Topology: spec.RedisSentinel, WaitReplicas: 2, WaitTimeout: 200 * time.Millisecond, Watermark: true}
	if got, ok := fx.Settings[registry.Redis].(*redisbackend.Settings); !ok || *got != want {
		t.Errorf("Settings = %+v, want redis %+v", fx.Settings, want)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"backend: etcd\nredis: {topology: sentinel}\n", "f.yaml:2: redis: needs backend redis, and backend is etcd"},
		{"backend: redis\nredis: {topology: cluster}\n", `f.yaml:2: redis.topology: must be single or sentinel, got "cluster"`},
		{"backend: redis\nredis: {wait_replicas: -2}\n", "f.yaml:2: redis.wait_replicas: must be >= 0, got -2"},
		{"backend: redis\nredis: sentinel\n", "f.yaml:2: redis: must be a mapping"},
		{"backend: redis\nredis: {quorum: 2}\n", "redis.quorum"},
		{"backend: redis\nredis: {url: \"http://x\"}\n", `f.yaml:2: redis.url: "http://x" must be a URL such as redis://127.0.0.1:6379/0`},
	} {
		_, err := scenario.ParseFixture("f.yaml", []byte(tc.yaml+body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want %q", tc.yaml, err, tc.want)
		}
	}
}
