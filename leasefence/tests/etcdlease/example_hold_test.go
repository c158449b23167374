package etcdlease_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
)

// The explicit pieces Lock puts together: a holder session on an etcd
// coordinator, and a write through the gate in the same etcd. An embedded
// member stands in for a cluster.
func Example_hold() {
	dir, _ := os.MkdirTemp("", "leasefence-etcd-")
	defer os.RemoveAll(dir)
	member, err := etcdembed.StartMember(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer member.Stop()
	// etcd's client warns of every call whose context ends before its
	// answer, such as the renewal a session gives up on when a pause of
	// the process (SIGSTOP, a long GC pause) outlasted its lease: expected,
	// so this client logs etcd's errors only.
	lg, err := zap.NewProduction(zap.IncreaseLevel(zap.ErrorLevel))
	if err != nil {
		log.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{member.Endpoint()}, DialTimeout: 5 * time.Second, Logger: lg})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	coord, err := etcdlease.New(cli, etcdlease.Options{TTL: 5 * time.Second}) // any number of processes may share it
	if err != nil {
		log.Fatal(err)
	}
	defer coord.Close() // ends what it runs in the background
	gate, err := etcdlease.NewGate(cli, "deploy-slot", etcdlease.GateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	client, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("agent-a"), Holder: "agent-a", ClockSkew: 100 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // bounds the acquisition only
	defer cancel()
	session, err := leasefence.Hold(ctx, coord, client, "deploy-slot", leasefence.HoldOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer session.Release(context.Background())
	fmt.Println("holding deploy-slot as", session.Token().Holder)

	select {
	case <-session.Lost():
		log.Fatal(session.Err()) // stop starting work
	default:
	}
	// The put lands if and only if the fence is not below the gate's floor:
	// one etcd transaction checks, raises the floor and writes.
	if err := gate.Commit(ctx, session.Token(), clientv3.OpPut("/app/deploy-slot/version", "v42")); err != nil {
		log.Fatal(err) // errors.Is(err, leasefence.ErrStaleFence): a newer holder wrote first
	}
	fmt.Println("committed v42")
	// Output:
	// holding deploy-slot as agent-a
	// committed v42
}
