package etcdlease

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasefence/lab/leasefence"
)

// MaxCommitOps is the most operations one Commit takes, whether or not it
// raises the floor. etcd refuses a transaction with more than 128
// operations in a branch (its --max-txn-ops, 128 by default), and a Commit
// that raises the floor spends one of them on the raise: the limit is the
// same whatever the floor, so that a Commit that works under one lease
// works under the next. A nested transaction (clientv3.OpTxn) counts as
// one here; etcd bounds its own branches to 128 as well. A cluster run
// with a lower --max-txn-ops refuses more, with etcd's own error.
const MaxCommitOps = 127

// GateOptions configures a Gate.
type GateOptions struct {
	// Prefix puts the gate's keys under it; default DefaultPrefix. Gates and
	// coordinators may share a prefix; Commit refuses operations on any key
	// under it.
	Prefix string
}

// Gate is a fence gate whose floor and refusal log are etcd keys, for a
// resource whose data lives in the same etcd. Any number of Gate values, in
// any number of processes, on one cluster, prefix and resource are one gate:
// they serialise through etcd transactions, never through process memory.
// A Gate is safe for concurrent use.
type Gate struct {
	cli       *clientv3.Client
	resource  string
	reserved  string // the prefix: keys no Commit operation may touch
	floorKey  string
	seqKey    string
	logPrefix string
}

var _ leasefence.Gate = (*Gate)(nil)

// NewGate returns the gate of resource on cli, or an error wrapping
// leasefence.ErrInvalidRequest for a nil client or a resource that breaks
// the id rule (a *leasefence.IDError: see leasefence.MaxIDLen). It sends
// nothing: the gate's keys are written at the first Commit, Admit or
// refusal.
func NewGate(cli *clientv3.Client, resource string, opts GateOptions) (*Gate, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: etcdlease.NewGate with a nil client", leasefence.ErrInvalidRequest)
	}
	if err := leasefence.ValidateID(leasefence.IDResource, resource); err != nil {
		return nil, err
	}
	prefix := prefixOr(opts.Prefix)
	base := prefix + "gates/" + resource + "/"
	return &Gate{
		cli:       cli,
		resource:  resource,
		reserved:  prefix,
		floorKey:  base + "floor",
		seqKey:    base + "seq",
		logPrefix: base + "log/",
	}, nil
}

// Resource returns the resource the gate guards.
func (g *Gate) Resource() string { return g.resource }

type floorValue struct {
	Holder string `json:"holder"`
	Fence  uint64 `json:"fence"`
}

// Commit applies ops in one etcd transaction with the check of t against the
// floor and, when t's fence is higher, the raise of the floor: the
// operations land if and only if t is admitted. A refused token (fence below
// the floor) is a *leasefence.StaleFenceError, appended to the durable log;
// the floor's fence under another holder is a *leasefence.TokenConflictError, logged
// too. Either is returned only once the refusal is in the log: when the log
// cannot be written (etcd fails, or ctx ends after the floor was read), the
// error is a *leasefence.RefusalNotLoggedError (leasefence.ErrRefusalNotLogged),
// which says the write was refused and carries the refusal as judged. A
// token for another resource is leasefence.ErrWrongResource and not logged;
// a token whose ids break the id rule is a *leasefence.IDError. More than
// MaxCommitOps operations is ErrTooManyOps, and an operation touching a key
// under the prefix is ErrReservedKey; all of these are refused before
// anything is sent. An operation etcd rejects fails the whole transaction:
// neither it nor the floor's raise is applied.
//
// When other writers move the floor between Commit's read and its
// transaction, Commit judges again, for as long as ctx allows. As for any
// etcd write, an error without an answer (ctx, network) leaves the outcome
// unknown: the operations may have landed.
func (g *Gate) Commit(ctx context.Context, t leasefence.Token, ops ...clientv3.Op) error {
	if err := g.check(ctx, t); err != nil {
		return err
	}
	if len(ops) > MaxCommitOps {
		return fmt.Errorf("%w: %d operations, at most MaxCommitOps (%d)", ErrTooManyOps, len(ops), MaxCommitOps)
	}
	for _, op := range ops {
		if err := g.checkOp(op); err != nil {
			return err
		}
	}
	return g.pass(ctx, t, ops, true)
}

// Admit raises the floor to t without writing anything: the coordinator's
// push of a new fence at reassignment. A token below the floor (or the
// floor's fence under another holder) changes nothing, is not logged, and is
// refused with Seq 0.
func (g *Gate) Admit(ctx context.Context, t leasefence.Token) error {
	if err := g.check(ctx, t); err != nil {
		return err
	}
	return g.pass(ctx, t, nil, false)
}

func (g *Gate) check(ctx context.Context, t leasefence.Token) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: gate call with a nil context", leasefence.ErrInvalidRequest)
	case t.Resource != g.resource:
		return fmt.Errorf("%w: token %v at the gate of %q", leasefence.ErrWrongResource, t, g.resource)
	}
	if err := leasefence.ValidateToken(t); err != nil {
		return err
	}
	return ctx.Err()
}

// pass admits t (with ops) or refuses it, logging the refusal if log.
func (g *Gate) pass(ctx context.Context, t leasefence.Token, ops []clientv3.Op, log bool) error {
	// Each failed comparison means another call moved the floor, so the
	// gate as a whole always progresses; ctx bounds one caller's wait.
	for {
		floor, fkv, err := g.readFloor(ctx)
		if err != nil {
			return err
		}
		if t.Fence < floor.Fence || (t.Fence == floor.Fence && t.Holder != floor.Holder) {
			rej := leasefence.Rejection{Resource: g.resource, Holder: t.Holder, Fence: t.Fence, FloorHolder: floor.Holder, FloorFence: floor.Fence}
			if log {
				return g.refuse(ctx, rej)
			}
			return leasefence.RejectionError(rej)
		}
		cmp := clientv3.Compare(clientv3.CreateRevision(g.floorKey), "=", 0)
		if fkv != nil {
			cmp = clientv3.Compare(clientv3.ModRevision(g.floorKey), "=", fkv.ModRevision)
		}
		then := ops
		if t.Fence > floor.Fence {
			then = append([]clientv3.Op{clientv3.OpPut(g.floorKey, mustJSON(floorValue{Holder: t.Holder, Fence: uint64(t.Fence)}))}, ops...)
		}
		resp, err := g.cli.Txn(ctx).If(cmp).Then(then...).Commit()
		if err != nil {
			return err
		}
		if resp.Succeeded {
			return nil
		}
		// The floor moved between the read and the transaction: judge again.
	}
}

// refuse appends r to the log under the next sequence number and returns
// the refusal. If the log cannot be written, the refusal as judged (Seq 0)
// is returned as a *leasefence.RefusalNotLoggedError saying why.
func (g *Gate) refuse(ctx context.Context, r leasefence.Rejection) error {
	notLogged := func(err error) error { return &leasefence.RefusalNotLoggedError{Rejection: r, Err: err} }
	// As in pass: a failed comparison means another refusal was logged.
	for {
		resp, err := g.cli.Get(ctx, g.seqKey)
		if err != nil {
			return notLogged(err)
		}
		seq, cmp, err := g.seqAt(resp)
		if err != nil {
			return notLogged(err)
		}
		logged := r
		logged.Seq = seq + 1
		txn, err := g.cli.Txn(ctx).If(cmp).Then(
			clientv3.OpPut(g.seqKey, strconv.FormatUint(logged.Seq, 10)),
			clientv3.OpPut(g.logKey(logged.Seq), mustJSON(logged)),
		).Commit()
		if err != nil {
			return notLogged(err)
		}
		if txn.Succeeded {
			return leasefence.RejectionError(logged)
		}
	}
}

// seqAt reads the number of refusals logged from a Get of the sequence key,
// with the comparison that holds while it is still that number.
func (g *Gate) seqAt(resp *clientv3.GetResponse) (uint64, clientv3.Cmp, error) {
	if len(resp.Kvs) == 0 {
		return 0, clientv3.Compare(clientv3.CreateRevision(g.seqKey), "=", 0), nil
	}
	kv := resp.Kvs[0]
	seq, err := strconv.ParseUint(string(kv.Value), 10, 64)
	if err != nil {
		return 0, clientv3.Cmp{}, fmt.Errorf("%w: %s", ErrCorruptKey, kv.Key)
	}
	return seq, clientv3.Compare(clientv3.ModRevision(g.seqKey), "=", kv.ModRevision), nil
}

// logKey orders the log by sequence number: zero-padded to the width of
// the largest uint64.
func (g *Gate) logKey(seq uint64) string { return fmt.Sprintf("%s%020d", g.logPrefix, seq) }

func (g *Gate) readFloor(ctx context.Context) (leasefence.Token, *mvccpb.KeyValue, error) {
	resp, err := g.cli.Get(ctx, g.floorKey)
	if err != nil {
		return leasefence.Token{}, nil, err
	}
	if len(resp.Kvs) == 0 {
		return leasefence.Token{}, nil, nil
	}
	kv := resp.Kvs[0]
	fv, err := decode[floorValue](kv)
	if err != nil {
		return leasefence.Token{}, nil, err
	}
	return leasefence.Token{Resource: g.resource, Holder: fv.Holder, Fence: leasefence.Fence(fv.Fence)}, kv, nil
}

// Floor returns the highest token admitted, or the zero Token if none.
func (g *Gate) Floor(ctx context.Context) (leasefence.Token, error) {
	if ctx == nil {
		return leasefence.Token{}, fmt.Errorf("%w: Floor with a nil context", leasefence.ErrInvalidRequest)
	}
	t, _, err := g.readFloor(ctx)
	return t, err
}

// Rejections returns the whole refusal log, oldest first: RejectionsSince
// from 0.
func (g *Gate) Rejections(ctx context.Context) ([]leasefence.Rejection, error) {
	rs, _, err := g.RejectionsSince(ctx, 0)
	return rs, err
}

// RejectionsSince returns the logged refusals whose Seq is above seq,
// oldest first. The log keeps every refusal, so missed is always 0.
func (g *Gate) RejectionsSince(ctx context.Context, seq uint64) (rs []leasefence.Rejection, missed uint64, err error) {
	if ctx == nil {
		return nil, 0, fmt.Errorf("%w: RejectionsSince with a nil context", leasefence.ErrInvalidRequest)
	}
	out := []leasefence.Rejection{}
	if seq == math.MaxUint64 {
		return out, 0, ctx.Err()
	}
	// Only the keys logKey makes: a resource name may contain "/", so the
	// keys of the gate of "r/log" (and of "r/log/<digits>") lie under this
	// gate's log prefix too, and must not be read as its refusals.
	first, last := g.logKey(seq+1), g.logKey(math.MaxUint64)
	resp, err := g.cli.Get(ctx, first, clientv3.WithRange(last+"\x00"), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, 0, err
	}
	for _, kv := range resp.Kvs {
		if !isLogKey(kv.Key, len(g.logPrefix)) {
			continue
		}
		r, err := decode[leasefence.Rejection](kv)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, r)
	}
	return out, 0, nil
}

// RejectionCount returns how many refusals were ever logged: the Seq of the
// newest.
func (g *Gate) RejectionCount(ctx context.Context) (uint64, error) {
	if ctx == nil {
		return 0, fmt.Errorf("%w: RejectionCount with a nil context", leasefence.ErrInvalidRequest)
	}
	resp, err := g.cli.Get(ctx, g.seqKey)
	if err != nil {
		return 0, err
	}
	n, _, err := g.seqAt(resp)
	return n, err
}

// isLogKey reports whether key, whose first n bytes are a log prefix, is a
// log key: the prefix and then exactly the 20 digits logKey writes.
func isLogKey(key []byte, n int) bool {
	digits := key[n:]
	if len(digits) != 20 {
		return false
	}
	for _, b := range digits {
		if b < '0' || b > '9' {
			return false
		}
	}
	return true
}

// checkOp refuses an operation that reads or writes any key under the
// prefix, looking inside nested transactions.
func (g *Gate) checkOp(op clientv3.Op) error {
	if op.IsTxn() {
		cmps, thenOps, elseOps := op.Txn()
		for _, c := range cmps {
			pc := c.GetCompare()
			if g.touches(pc.GetKey(), pc.GetRangeEnd()) {
				return fmt.Errorf("%w: a comparison on %q", ErrReservedKey, pc.GetKey())
			}
		}
		for _, o := range append(thenOps, elseOps...) {
			if err := g.checkOp(o); err != nil {
				return err
			}
		}
		return nil
	}
	if g.touches(op.KeyBytes(), op.RangeBytes()) {
		return fmt.Errorf("%w: %q (range end %q) reaches under %q", ErrReservedKey, op.KeyBytes(), op.RangeBytes(), g.reserved)
	}
	return nil
}

// touches reports whether the key, or the range [key, end), meets the
// reserved prefix. An end of "\x00" means every key from key on.
func (g *Gate) touches(key, end []byte) bool {
	prefix := []byte(g.reserved)
	if len(end) == 0 {
		return bytes.HasPrefix(key, prefix)
	}
	prefixEnd := []byte(clientv3.GetPrefixRangeEnd(g.reserved))
	startsBeforePrefixEnds := len(prefixEnd) == 1 && prefixEnd[0] == 0 || bytes.Compare(key, prefixEnd) < 0
	endsAfterPrefixStarts := len(end) == 1 && end[0] == 0 || bytes.Compare(end, prefix) > 0
	return startsBeforePrefixEnds && endsAfterPrefixStarts
}

// fenceInt64 is the revision a fence stands for; fences beyond int64 were
// never issued by etcd.
func fenceInt64(f leasefence.Fence) (int64, bool) {
	if f > math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}
