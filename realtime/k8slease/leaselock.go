package k8slease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leases is the resource the Lease objects are, as the API server names
// it in its errors.
var leases = schema.GroupResource{Group: coordinationv1.GroupName, Resource: "leases"}

// KeyPrefix is where the Lease objects live in etcd, as kube-apiserver
// keeps them: KeyPrefix + namespace + "/" + name.
const KeyPrefix = "/registry/leases/"

// LeaseLock is the resourcelock.Interface client-go's LeaseLock is, with
// the Lease object kept in etcd as kube-apiserver keeps it: a Get of a
// missing object is apierrors' NotFound, a Create of an existing one
// AlreadyExists, and an Update carries the resourceVersion it read (the
// object's etcd mod revision) and is refused with Conflict unless the
// object is still at that revision (one compare-and-swap transaction).
// Like client-go's LeaseLock it remembers the object it last read or
// wrote, and updates that one.
//
// It also notes, for the lab, what its writes did for its Identity: the
// revision of the write that acquired the Lease (a write over a record
// that was not this identity's), the expiry of the record of its last
// committed write (renewTime plus leaseDurationSeconds), and whether a
// release (a write of an empty holder) replaced a live record of its own.
type LeaseLock struct {
	Client    *clientv3.Client
	Namespace string
	Name      string
	ID        string // the elector's identity

	mu       sync.Mutex
	lease    *coordinationv1.Lease // as last read or written, its ResourceVersion set
	acquired int64                 // revision of the write that took the Lease for ID
	expiry   time.Time             // of the last record ID wrote for itself
	released bool                  // a release replaced a live record of ID's
}

var _ resourcelock.Interface = (*LeaseLock)(nil)

func (l *LeaseLock) key() string { return KeyPrefix + l.Namespace + "/" + l.Name }

// decode is the Lease object stored at kv, its resourceVersion kv's mod
// revision.
func decode(kv []byte, rev int64) (*coordinationv1.Lease, error) {
	var o coordinationv1.Lease
	if err := json.Unmarshal(kv, &o); err != nil {
		return nil, fmt.Errorf("k8slease: decoding a Lease: %w", err)
	}
	o.ResourceVersion = strconv.FormatInt(rev, 10)
	return &o, nil
}

// Get implements resourcelock.Interface: the record in the Lease object,
// and that record as JSON (what the elector compares to see a change).
func (l *LeaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	resp, err := l.Client.Get(ctx, l.key())
	if err != nil {
		return nil, nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, nil, apierrors.NewNotFound(leases, l.Name)
	}
	o, err := decode(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	if err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	l.lease = o
	l.mu.Unlock()
	r := resourcelock.LeaseSpecToLeaderElectionRecord(&o.Spec)
	raw, err := json.Marshal(*r)
	if err != nil {
		return nil, nil, err
	}
	return r, raw, nil
}

// Create implements resourcelock.Interface: the Lease object, if there is
// none.
func (l *LeaseLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	o := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace},
		Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&ler),
	}
	val, err := json.Marshal(o)
	if err != nil {
		return err
	}
	resp, err := l.Client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(l.key()), "=", 0)).
		Then(clientv3.OpPut(l.key(), string(val))).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return apierrors.NewAlreadyExists(leases, l.Name)
	}
	l.wrote(nil, o, ler, resp.Header.Revision)
	return nil
}

// Update implements resourcelock.Interface: the Lease object last read or
// written, with ler as its spec, if it is still at that object's
// resourceVersion.
func (l *LeaseLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	prev := l.lease
	l.mu.Unlock()
	if prev == nil {
		return errors.New("lease not initialized, call get or create first") // client-go's LeaseLock's words
	}
	rv, err := strconv.ParseInt(prev.ResourceVersion, 10, 64)
	if err != nil {
		return apierrors.NewBadRequest("resourceVersion " + strconv.Quote(prev.ResourceVersion))
	}
	o := prev.DeepCopy()
	o.ResourceVersion = "" // the revision is etcd's, never stored in the object
	o.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&ler)
	val, err := json.Marshal(o)
	if err != nil {
		return err
	}
	resp, err := l.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(l.key()), "=", rv)).
		Then(clientv3.OpPut(l.key(), string(val))).Else(clientv3.OpGet(l.key(), clientv3.WithCountOnly())).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		if resp.Responses[0].GetResponseRange().Count == 0 {
			return apierrors.NewNotFound(leases, l.Name)
		}
		return apierrors.NewConflict(leases, l.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	l.wrote(prev, o, ler, resp.Header.Revision)
	return nil
}

// wrote keeps o, committed at rev over prev (nil: created), as the object
// last written, and notes what the write did for the identity.
func (l *LeaseLock) wrote(prev, o *coordinationv1.Lease, ler resourcelock.LeaderElectionRecord, rev int64) {
	o.ResourceVersion = strconv.FormatInt(rev, 10)
	var before resourcelock.LeaderElectionRecord
	if prev != nil {
		before = *resourcelock.LeaseSpecToLeaderElectionRecord(&prev.Spec)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lease = o
	switch ler.HolderIdentity {
	case l.ID:
		if before.HolderIdentity != l.ID {
			l.acquired = rev
		}
		l.expiry = expiry(ler)
	case "":
		l.released = before.HolderIdentity == l.ID && time.Now().Before(expiry(before))
	}
}

// expiry is when record r says its lease ends: its renewTime plus its
// leaseDurationSeconds. No other elector takes the Lease before: each
// waits leaseDurationSeconds from the instant it first read the record,
// after it was written.
func expiry(r resourcelock.LeaderElectionRecord) time.Time {
	return r.RenewTime.Add(time.Duration(r.LeaseDurationSeconds) * time.Second)
}

// RecordEvent implements resourcelock.Interface: no events are recorded,
// as with a LeaseLock without an EventRecorder.
func (l *LeaseLock) RecordEvent(string) {}

// Identity implements resourcelock.Interface.
func (l *LeaseLock) Identity() string { return l.ID }

// Describe implements resourcelock.Interface: namespace/name.
func (l *LeaseLock) Describe() string { return l.Namespace + "/" + l.Name }

// Acquired is the revision of the write that took the Lease for the
// identity, 0 before any did.
func (l *LeaseLock) Acquired() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acquired
}

// Expiry is when the record of the identity's last committed write says
// its lease ends.
func (l *LeaseLock) Expiry() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiry
}

// Released reports whether a release replaced a record of the identity's
// before its expiry.
func (l *LeaseLock) Released() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}
