package etcdlease

import (
	"errors"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// A keep-alive counts only when a read after it reports no higher Raft
// term: a higher one means a leader was elected since, and the lessor that
// answered may have been the replaced one (as in etcd v3.7.3, where a
// resumed leader answered "TTL 1" at term 2 while the others were at 3).
func TestKeptAliveAtTerm(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ka, later *pb.ResponseHeader
		stale     bool
	}{
		{"same term", &pb.ResponseHeader{RaftTerm: 3}, &pb.ResponseHeader{RaftTerm: 3}, false},
		{"read from a member behind", &pb.ResponseHeader{RaftTerm: 3}, &pb.ResponseHeader{RaftTerm: 2}, false},
		{"replaced leader", &pb.ResponseHeader{RaftTerm: 2}, &pb.ResponseHeader{RaftTerm: 3}, true},
		{"no keep-alive header", nil, &pb.ResponseHeader{RaftTerm: 3}, true},
		{"no read header", &pb.ResponseHeader{RaftTerm: 3}, nil, true},
	} {
		err := keptAliveAtTerm(tc.ka, tc.later)
		if got := errors.Is(err, ErrStaleKeepAlive); got != tc.stale || (err != nil) != tc.stale {
			t.Errorf("%s: keptAliveAtTerm = %v; want stale %v", tc.name, err, tc.stale)
		}
	}
}
