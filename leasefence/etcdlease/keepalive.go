package etcdlease

import (
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// keptAliveAtTerm returns nil when a keep-alive answered with header ka is
// known to have restarted its lease at the leader, given the header later
// of a linearizable request that completed after it (or, in renewKnown,
// concurrently), and otherwise ErrStaleKeepAlive.
//
// Why a higher term at the later request disproves the keep-alive. A
// leader's lessor answers keep-alives itself, and its leadership check is
// skipped while its Raft ticker looks recent: a leader paused and replaced,
// once resumed, answers from its own lessor (at its old term) before it
// learns of the new one, while the new leader expires the lease on its own
// schedule. A linearizable request is answered only after a quorum has
// confirmed the leader of the term it reports, and Raft has at most one
// leader per term; so a later request at the keep-alive's term (or lower,
// from a member not yet caught up to the term the keep-alive reported)
// means that leader still led after the keep-alive, and one at a higher
// term means a leader was elected in between, and the lessor that answered
// may have been the replaced one.
//
// What it cannot see: the keep-alive's header carries the term of the
// member the client talked to, filled in when it answers. A follower
// forwards a keep-alive to the leader it knows of; if that leader has been
// replaced and the follower learns the new term before it answers, the
// header shows the new term and the stale renewal passes.
func keptAliveAtTerm(ka, later *pb.ResponseHeader) error {
	switch {
	case ka == nil || later == nil:
		return fmt.Errorf("%w: a response without a header", ErrStaleKeepAlive)
	case later.RaftTerm > ka.RaftTerm:
		return fmt.Errorf("%w: the keep-alive answered at Raft term %d, a later read at %d", ErrStaleKeepAlive, ka.RaftTerm, later.RaftTerm)
	}
	return nil
}
