package k8slease_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
	"github.com/leasefence/lab/realtime/k8slease"
)

// etcd starts an embedded etcd for the test and returns a client of it.
func etcd(t *testing.T) *clientv3.Client {
	t.Helper()
	m, err := etcdembed.StartMember(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	cli, err := etcdembed.Client(m.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func record(holder string, renewed time.Time) resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 2,
		AcquireTime: metav1.NewTime(renewed), RenewTime: metav1.NewTime(renewed)}
}

// The Lease object answers as kube-apiserver's does: NotFound before it
// is created, AlreadyExists to a second Create, Conflict to an Update
// from a resourceVersion no longer current; and its resourceVersion is
// etcd's mod revision of its key.
func TestLeaseLockAsTheAPIServer(t *testing.T) {
	ctx := t.Context()
	cli := etcd(t)
	a := &k8slease.LeaseLock{Client: cli, Namespace: "ns", Name: "res-1", ID: "a"}
	b := &k8slease.LeaseLock{Client: cli, Namespace: "ns", Name: "res-1", ID: "b"}
	if _, _, err := a.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing Lease: %v, want NotFound", err)
	}
	if err := a.Update(ctx, record("a", time.Now())); err == nil {
		t.Fatal("Update before any Get or Create succeeded")
	}
	now := time.Now()
	if err := a.Create(ctx, record("a", now)); err != nil {
		t.Fatal(err)
	}
	created := a.Acquired()
	if created == 0 || !a.Expiry().Equal(now.Add(2*time.Second)) {
		t.Errorf("after Create: acquired at %d, expiry %v; want the revision, and renewTime + 2s", created, a.Expiry())
	}
	if err := b.Create(ctx, record("b", now)); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("a second Create: %v, want AlreadyExists", err)
	}
	r, raw, err := b.Get(ctx)
	if err != nil || r.HolderIdentity != "a" || len(raw) == 0 {
		t.Fatalf("Get: %+v %q %v", r, raw, err)
	}
	kv, err := cli.Get(ctx, k8slease.KeyPrefix+"ns/res-1")
	if err != nil {
		t.Fatal(err)
	}
	if rev := kv.Kvs[0].ModRevision; rev != created {
		t.Errorf("mod revision %d, acquiring revision %d", rev, created)
	}
	// a renews: its term's revision stays the acquiring one.
	if err := a.Update(ctx, record("a", time.Now())); err != nil {
		t.Fatalf("a renewal: %v", err)
	}
	if a.Acquired() != created {
		t.Errorf("a renewal moved the acquiring revision from %d to %d", created, a.Acquired())
	}
	// b read the object before a's renewal: its update is refused.
	if err := b.Update(ctx, record("b", time.Now())); !apierrors.IsConflict(err) {
		t.Fatalf("an Update from a stale resourceVersion: %v, want Conflict", err)
	}
	if b.Acquired() != 0 {
		t.Errorf("a refused Update counts as acquired at %d", b.Acquired())
	}
	if _, _, err := b.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, record("b", time.Now())); err != nil {
		t.Fatalf("an Update from the current resourceVersion: %v", err)
	}
	if b.Acquired() <= created {
		t.Errorf("b took the Lease at revision %d, after a's %d", b.Acquired(), created)
	}
	// a's release, from the object it last wrote, is refused; read again,
	// it replaces b's live record, which is not a's own.
	if err := a.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}); !apierrors.IsConflict(err) {
		t.Fatalf("a release from a stale resourceVersion: %v, want Conflict", err)
	}
	if _, _, err := a.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	if a.Released() {
		t.Error("a release of b's record counts as a's own")
	}
	if _, _, err := b.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, record("b", time.Now())); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	if !b.Released() {
		t.Error("b's release of its own live record does not count")
	}
}
