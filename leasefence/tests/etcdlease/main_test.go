package etcdlease_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
)

// member is one embedded etcd shared by the tests of this package; each
// test works under its own prefix (newPrefix). Cluster tests start their own.
var (
	member *etcdembed.Member
	cli    *clientv3.Client
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "etcdlease-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	member, err = etcdembed.StartMember(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer member.Stop()
	cli, err = etcdembed.Client(member.Endpoint())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cli.Close()
	return m.Run()
}

var prefixes atomic.Int64

// newPrefix is a key prefix no other test uses.
func newPrefix() string { return fmt.Sprintf("/test-%d/", prefixes.Add(1)) }
