package etcdlease

import (
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The coordinator's memory of its grants stays in proportion to the
// grants it keeps alive: grants last kept alive long ago are forgotten
// once there are enough of them, and live ones never are; and a grant is
// recalled only within a TTL of its last keep-alive.
func TestRememberForgetsOldGrants(t *testing.T) {
	c := &Coordinator{ttl: 2}
	long := time.Now().Add(-time.Hour)
	for i := range 10 * minPrune {
		c.remember(grantKey{resource: fmt.Sprint("old-", i), holder: "a", fence: int64(i)}, clientv3.LeaseID(i), long)
		if n := len(c.granted); n > minPrune {
			t.Fatalf("after %d grants kept alive an hour ago, %d are remembered", i+1, n)
		}
	}
	live := 3 * minPrune
	for i := range live {
		c.remember(grantKey{resource: fmt.Sprint("live-", i), holder: "a", fence: int64(i)}, clientv3.LeaseID(i), time.Now())
	}
	for i := range live {
		k := grantKey{resource: fmt.Sprint("live-", i), holder: "a", fence: int64(i)}
		if id, ok := c.recall(k); !ok || id != clientv3.LeaseID(i) {
			t.Fatalf("live grant %d: recalled %x, %v", i, id, ok)
		}
	}
	if n := len(c.granted); n > live+minPrune {
		t.Errorf("%d remembered for %d live grants", n, live)
	}
	// A grant last kept alive a TTL ago is not recalled, even before a
	// prune forgets it: its lease is not known to be alive.
	lapsed := grantKey{resource: "lapsed", holder: "a", fence: 1}
	c.remember(lapsed, 7, time.Now().Add(-2*time.Second))
	if id, ok := c.recall(lapsed); ok {
		t.Errorf("a grant last kept alive a TTL ago is recalled: %x", id)
	}
	c.forget(grantKey{resource: "live-0", holder: "a", fence: 0})
	if _, ok := c.recall(grantKey{resource: "live-0", holder: "a", fence: 0}); ok {
		t.Error("a forgotten grant is recalled")
	}
}
