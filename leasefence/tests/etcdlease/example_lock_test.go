package etcdlease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
)

// Two holders of one lock on etcd, each writing through the gate in the
// same etcd; the first one's late write, after its lock was over, is
// refused. Releasing stands in here for what takes a lock from a holder
// behind its back: its process freezing past the TTL (a GC pause, SIGSTOP),
// or its network failing, while the write is on its way.
//
// This is etcdlease.Lock's runnable example, and the README's quick start.
// It starts an embedded etcd, so it lives in this module, which requires
// etcd's server for its tests already: were it beside etcdlease, that
// module's go.mod would require the server, and every importer's module
// graph would list it.
func Example_lock() {
	ctx := context.Background()
	// An etcd to try it on: one member in a temporary directory. For your
	// own cluster: clientv3.New(clientv3.Config{Endpoints: ...}).
	dir, err := os.MkdirTemp("", "leasefence-quickstart-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	member, err := etcdembed.StartMember(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer member.Stop()
	cli, err := etcdembed.Client(member.Endpoint())
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	gate, err := etcdlease.NewGate(cli, "deploy-slot", etcdlease.GateOptions{})
	if err != nil {
		log.Fatal(err)
	}

	a, err := etcdlease.Lock(ctx, cli, "deploy-slot", etcdlease.LockOptions{Holder: "agent-a"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("agent-a:", gate.Commit(ctx, a.Token(), clientv3.OpPut("/app/version", "v1")))
	_, _ = a.Release(ctx) // agent-a's lock is over; it does not know yet

	b, err := etcdlease.Lock(ctx, cli, "deploy-slot", etcdlease.LockOptions{Holder: "agent-b"})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Release(ctx)
	fmt.Println("agent-b:", gate.Commit(ctx, b.Token(), clientv3.OpPut("/app/version", "v2")))

	err = gate.Commit(ctx, a.Token(), clientv3.OpPut("/app/version", "v1 again")) // late
	var stale *leasefence.StaleFenceError
	if errors.As(err, &stale) {
		fmt.Printf("agent-a, late: refused; %s wrote first\n", stale.FloorHolder)
	}
	// Output:
	// agent-a: <nil>
	// agent-b: <nil>
	// agent-a, late: refused; agent-b wrote first
}
