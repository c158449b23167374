// Package etcdtest starts embedded etcd members and clusters for tests:
// under t.TempDir, with a client, all stopped and closed in t.Cleanup.
// The members themselves are package etcdembed's, which a program may link
// without package testing.
package etcdtest

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
)

// NewMember starts a single member under t.TempDir and returns it with a
// client of it; both are closed in t.Cleanup.
func NewMember(t testing.TB) (*etcdembed.Member, *clientv3.Client) {
	t.Helper()
	c, cli := NewCluster(t, 1)
	return c.Members[0], cli
}

// NewCluster starts an n-member cluster under t.TempDir and returns it with
// a client of every member; both are closed in t.Cleanup.
func NewCluster(t testing.TB, n int) (*etcdembed.Cluster, *clientv3.Client) {
	t.Helper()
	c, err := etcdembed.StartCluster(t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cli, err := etcdembed.Client(c.Endpoints()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return c, cli
}
