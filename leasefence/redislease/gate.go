package redislease

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
)

// GateOptions configures a Gate.
type GateOptions struct {
	// Prefix is the key prefix, default DefaultPrefix; coordinator and gates
	// may share one.
	Prefix string
	// RejectionLog is how many refusals the log retains, the newest; 0
	// means leasefence.DefaultRejectionLog. RejectionCount counts them all.
	RejectionLog int
	// Replication: WAIT for replicas after every Commit or Admit that
	// applied anything; the zero value waits for none. One that too few
	// replicas acknowledged returns an error matching ErrNotReplicated.
	Replication Replication
	// Watermark: the process's memory of the floors it has seen, which a
	// gate puts back when Redis lost them; nil remembers nothing.
	Watermark *Watermark
}

// Gate is a fence gate whose floor and refusal log are Redis keys, for a
// resource whose data lives in the same Redis. On a cluster the data must
// share the gate's hash slot: name its keys with the prefix's hash tag and
// a name of your own, "{leasefence:}app:...". Any number of Gate values, in
// any number of processes, on one Redis, prefix and resource are one gate:
// they serialise through Redis, never through process memory. A Gate is
// safe for concurrent use.
type Gate struct {
	rdb      redis.UniversalClient
	resource string
	reserved []string // the prefixes of the package's own keys, which no Commit command may name
	floorKey string
	logKey   string
	retain   string
	// pipelinedWatch: rdb is a single-node client, so WATCH can share a
	// round trip with the read of the floor. Cluster and ring clients must
	// WATCH first, to pick the node.
	pipelinedWatch bool

	repl       Replication
	watermark  *Watermark
	counterKey string // the counter of the prefix, whose fences the watermark follows
}

var _ leasefence.Gate = (*Gate)(nil)

// NewGate returns the gate of resource on rdb, or an error wrapping
// leasefence.ErrInvalidRequest for a nil client, an empty or oversized
// resource, or a bad option. Nothing is written until the first Commit,
// Admit or refusal.
func NewGate(rdb redis.UniversalClient, resource string, opts GateOptions) (*Gate, error) {
	if isNil(rdb) {
		return nil, fmt.Errorf("%w: redislease.NewGate with a nil client", leasefence.ErrInvalidRequest)
	}
	if err := leasefence.ValidateID(leasefence.IDResource, resource); err != nil {
		return nil, fmt.Errorf("redislease.NewGate: %w", err)
	}
	if opts.RejectionLog < 0 {
		return nil, fmt.Errorf("%w: GateOptions.RejectionLog %d is negative", leasefence.ErrInvalidRequest, opts.RejectionLog)
	}
	if err := opts.Replication.check("GateOptions.Replication", rdb); err != nil {
		return nil, err
	}
	k, err := newKeys(opts.Prefix)
	if err != nil {
		return nil, err
	}
	retain := opts.RejectionLog
	if retain == 0 {
		retain = leasefence.DefaultRejectionLog
	}
	_, single := rdb.(*redis.Client)
	return &Gate{
		rdb:            rdb,
		resource:       resource,
		reserved:       k.reserved(),
		floorKey:       k.gateFloor(resource),
		logKey:         k.gateLog(resource),
		retain:         strconv.Itoa(retain),
		pipelinedWatch: single,
		repl:           opts.Replication,
		watermark:      opts.Watermark,
		counterKey:     k.counter(),
	}, nil
}

// Resource is the one resource this gate guards.
func (g *Gate) Resource() string { return g.resource }

// Commit runs the commands write queues on pipe in one MULTI/EXEC with the
// raise of the floor, if t is admitted: its fence above the floor, or the
// floor's own token. The commands land if and only if t is admitted, in
// every process that writes through a Gate on this resource.
//
// write is called once, before anything is sent, and only queues: its pipe
// refuses Exec (the gate runs the commands), and the replies reach the
// commands it queued (a *redis.StringCmd and so on) once Commit returns
// nil. A write that returns an error sends nothing, and its error is
// returned as is. A command that names a key under the gate's prefix, or
// that could reach any key (a script, FLUSHDB, a nested MULTI), is refused
// with ErrReservedKey before anything is sent, naming the command and the
// key. Every argument is judged as go-redis sends it, whatever its Go type
// (*string, an encoding.BinaryMarshaler, a name that is one); an argument
// of a type go-redis cannot send is refused the same way.
//
// A token below the floor is refused with a *leasefence.StaleFenceError, the
// floor's fence under another holder with a *leasefence.TokenConflictError;
// both are appended to the durable log first (if the log cannot be written,
// the refusal comes back with Seq 0, wrapped with why). A token for another
// resource is leasefence.ErrWrongResource and not logged.
//
// A command Redis refuses while queueing (unknown, or with the wrong number
// of arguments) makes it run none of the transaction: nothing is applied,
// the floor is not raised, and the error says so. If a queued command fails
// at run time, Redis has applied the others and
// the floor's raise all the same (it has no rollback): Commit returns an
// error matching ErrCommandFailed that names the command. When other
// writers move the floor between the read and EXEC, Commit judges again,
// for as long as ctx allows. As for any Redis write, an error without an
// answer (ctx, network) leaves the outcome unknown.
func (g *Gate) Commit(ctx context.Context, t leasefence.Token, write func(ctx context.Context, pipe redis.Pipeliner) error) error {
	if err := g.check(ctx, t); err != nil {
		return err
	}
	if write == nil {
		return fmt.Errorf("%w: Commit with a nil write", leasefence.ErrInvalidRequest)
	}
	cmds, err := g.record(ctx, write)
	if err != nil {
		return err
	}
	// Each retry means another writer moved the floor, so the gate as a
	// whole progresses; ctx bounds one caller's wait.
	for {
		done, err := g.attempt(ctx, t, cmds)
		if done || err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// record calls write on a pipeline that only queues, and returns what it
// queued once every command has passed checkCmd.
func (g *Gate) record(ctx context.Context, write func(context.Context, redis.Pipeliner) error) ([]redis.Cmder, error) {
	pipe := g.rdb.Pipeline()
	if err := write(ctx, queueOnly{pipe}); err != nil {
		return nil, err
	}
	cmds := slices.Clone(pipe.Cmds())
	pipe.Discard()
	for _, c := range cmds {
		if err := g.checkCmd(c); err != nil {
			return nil, err
		}
	}
	return cmds, nil
}

// errQueueOnly is what a Commit's write gets from running its pipe itself.
var errQueueOnly = errors.New("redislease: a Commit's write only queues commands; the gate runs them in its transaction")

// queueOnly is the pipe a Commit's write queues on: every way to run the
// commands early is refused, so they run in the gate's transaction or not
// at all.
type queueOnly struct{ redis.Pipeliner }

func (q queueOnly) Exec(context.Context) ([]redis.Cmder, error) { return nil, errQueueOnly }
func (q queueOnly) Pipeline() redis.Pipeliner                   { return q }
func (q queueOnly) TxPipeline() redis.Pipeliner                 { return q }

func (q queueOnly) Pipelined(_ context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	if err := fn(q); err != nil {
		return nil, err
	}
	return nil, errQueueOnly
}

func (q queueOnly) TxPipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	return q.Pipelined(ctx, fn)
}

// anyKey are commands that can reach keys their arguments do not name, or
// change what the transaction means: none may run inside a Commit.
var anyKey = map[string]bool{
	"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true,
	"function": true, "script": true, "flushdb": true, "flushall": true, "swapdb": true, "select": true,
	"multi": true, "exec": true, "discard": true, "watch": true, "unwatch": true,
}

// checkCmd refuses a command that names one of the package's keys. It does
// not know which arguments are keys, so it refuses any argument that begins
// like one: a value that does is refused too.
//
// It judges each argument as go-redis will send it, whatever its Go type:
// it encodes every argument that could carry a key's bytes (string,
// *string, []byte, an encoding.BinaryMarshaler, net.IP) once, puts the
// encoding in the command in its place, so what was judged is what is sent
// (a BinaryMarshaler is not asked twice), and reads the name from the
// encoded first argument. Numbers, booleans, times and durations are sent
// as digits, signs and letters, which never begin with the '{' every
// reserved key begins with. Any other type (go-redis cannot send it) is
// refused, naming the command and the type.
func (g *Gate) checkCmd(c redis.Cmder) error {
	args := c.Args()
	texts := make([]string, len(args))
	for i, a := range args {
		wire, text, err := encodeArg(a)
		if err != nil {
			return fmt.Errorf("%w: %s: argument %d is a %T, which the gate cannot read: %w", ErrReservedKey, cmdName(texts, args), i, a, err)
		}
		args[i], texts[i] = wire, text
	}
	name := strings.ToLower(cmdName(texts, args))
	if anyKey[name] {
		return fmt.Errorf("%w: %s can reach any key", ErrReservedKey, name)
	}
	for _, s := range texts[min(1, len(texts)):] {
		for _, r := range g.reserved {
			if strings.HasPrefix(s, r) {
				return fmt.Errorf("%w: %s names %q, under %q", ErrReservedKey, name, s, r)
			}
		}
	}
	return nil
}

// cmdName is the command's name as sent, once its first argument is
// encoded (texts[0]); "a command" before.
func cmdName(texts []string, args []any) string {
	if len(args) == 0 || (texts[0] == "" && args[0] != "") {
		return "a command"
	}
	return texts[0]
}

// encodeArg returns a as go-redis's writer will send it: the value to send
// in its place (the encoding itself, for the types whose bytes could change
// between judging and sending) and its text, "" for a type whose encoding
// cannot begin with '{'. The cases follow the writer's, in its order (a
// time.Time is a BinaryMarshaler too, but is sent as RFC 3339).
func encodeArg(a any) (any, string, error) {
	switch v := a.(type) {
	case nil:
		return a, "", nil
	case string:
		return v, v, nil
	case *string:
		if v == nil {
			return "", "", nil
		}
		return *v, *v, nil
	case []byte:
		return v, string(v), nil
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, uintptr,
		*int, *int8, *int16, *int32, *int64, *uint, *uint8, *uint16, *uint32, *uint64, *uintptr,
		float32, float64, *float32, *float64, bool, *bool,
		time.Time, *time.Time, time.Duration, *time.Duration:
		return a, "", nil
	case encoding.BinaryMarshaler:
		b, err := v.MarshalBinary()
		if err != nil {
			return nil, "", err
		}
		return b, string(b), nil
	case net.IP:
		return []byte(slices.Clone(v)), string(v), nil
	}
	return nil, "", errors.New("go-redis sends only strings, numbers, booleans, times, net.IP and encoding.BinaryMarshaler")
}

// attempt judges t against the floor under WATCH and then admits it (with
// cmds) or refuses it. done is false when the floor moved before EXEC, so
// nothing was applied and Commit must judge again.
func (g *Gate) attempt(ctx context.Context, t leasefence.Token, cmds []redis.Cmder) (done bool, err error) {
	err = g.watch(ctx, func(tx *redis.Tx) (bool, error) {
		seen := g.watermark.floor(g.floorKey) // before the read: see Watermark.floor
		floor, present, err := g.watchFloor(ctx, tx)
		if err != nil {
			return false, err
		}
		if floorLost(seen, floor, present) {
			return false, g.restoreFloor(ctx, floor, seen) // then judge again
		}
		var execErr error
		switch judge(floor, present, t) {
		case verdictStale, verdictConflict:
			done, execErr, err = g.refuse(ctx, tx, t, floor)
		case verdictRaise:
			done, execErr, err = g.admit(ctx, tx, t, true, cmds)
		default:
			done, execErr, err = g.admit(ctx, tx, t, false, cmds)
		}
		return watchCleared(execErr), err
	})
	return done, err
}

// watch runs fn on a connection of its own, where the floor is (or, on a
// single-node client, will be) WATCHed. fn reports whether an EXEC cleared
// the WATCH; when none did, watch sends UNWATCH, so that no WATCH stays on a
// connection the pool hands to someone else.
func (g *Gate) watch(ctx context.Context, fn func(tx *redis.Tx) (cleared bool, err error)) error {
	var keys []string
	if !g.pipelinedWatch {
		keys = []string{g.floorKey}
	}
	return g.rdb.Watch(ctx, func(tx *redis.Tx) error {
		cleared, err := fn(tx)
		if !cleared {
			_ = tx.Unwatch(context.WithoutCancel(ctx)).Err()
		}
		return err
	}, keys...)
}

// errNoExec stands for the EXEC a Commit with nothing to apply never sends.
var errNoExec = errors.New("redislease: no EXEC was sent")

// watchCleared reports whether a transaction that ended with err certainly
// reached an EXEC that Redis ran or refused, either of which clears the
// WATCH. Any other error may have come before EXEC (on MULTI, say).
func watchCleared(err error) bool {
	return err == nil || errors.Is(err, redis.TxFailedErr) || redis.IsExecAbortError(err)
}

// watchFloor WATCHes the floor (unless Watch already did) and reads it.
func (g *Gate) watchFloor(ctx context.Context, tx *redis.Tx) (leasefence.Token, bool, error) {
	var read *redis.SliceCmd
	if g.pipelinedWatch {
		_, err := tx.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "watch", g.floorKey)
			read = p.HMGet(ctx, g.floorKey, "f", "h")
			return nil
		})
		if err != nil {
			return leasefence.Token{}, false, fmt.Errorf("redislease: watch the floor of %q: %w", g.resource, err)
		}
	} else {
		read = tx.HMGet(ctx, g.floorKey, "f", "h")
	}
	return g.parseFloor(read)
}

func (g *Gate) parseFloor(read *redis.SliceCmd) (leasefence.Token, bool, error) {
	vals, err := read.Result()
	if err != nil {
		return leasefence.Token{}, false, err
	}
	if len(vals) != 2 || vals[0] == nil {
		return leasefence.Token{}, false, nil
	}
	f, ferr := strconv.ParseUint(fmt.Sprint(vals[0]), 10, 64)
	h, ok := vals[1].(string)
	if ferr != nil || !ok || f == 0 {
		return leasefence.Token{}, false, fmt.Errorf("%w: %s holds %v", ErrCorruptKey, g.floorKey, vals)
	}
	return leasefence.Token{Resource: g.resource, Holder: h, Fence: leasefence.Fence(f)}, true, nil
}

type verdict int

const (
	verdictRaise    verdict = iota // above the floor, or no floor yet
	verdictEqual                   // the floor's own token
	verdictConflict                // the floor's fence under another holder
	verdictStale                   // below the floor
)

// judge is the admission rule of leasefence.FenceGate, the same one the
// scripts' floor function keeps.
func judge(floor leasefence.Token, present bool, t leasefence.Token) verdict {
	switch {
	case !present || t.Fence > floor.Fence:
		return verdictRaise
	case t.Fence < floor.Fence:
		return verdictStale
	case t.Holder == floor.Holder:
		return verdictEqual
	}
	return verdictConflict
}

// admit sends MULTI, the raise of the floor (if raise), cmds and EXEC. It
// returns whether it is done, the transaction's own error, and the error
// for Commit.
func (g *Gate) admit(ctx context.Context, tx *redis.Tx, t leasefence.Token, raise bool, cmds []redis.Cmder) (bool, error, error) {
	if !raise && len(cmds) == 0 {
		// Admitted, with nothing to apply: go-redis sends no empty
		// MULTI/EXEC, so no EXEC clears the WATCH either.
		return true, errNoExec, nil
	}
	_, execErr := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if raise {
			p.HSet(ctx, g.floorKey, "f", fenceArg(t.Fence), "h", t.Holder)
		}
		for _, c := range cmds {
			c.SetErr(nil)
			_ = p.Process(ctx, c)
		}
		return nil
	})
	var rerr redis.Error
	switch {
	case execErr == nil:
		return true, nil, g.applied(ctx, tx, "commit", t)
	case errors.Is(execErr, redis.TxFailedErr):
		return false, execErr, nil // the floor moved: nothing was applied
	case redis.IsExecAbortError(execErr):
		// go-redis gives every command EXEC's EXECABORT; a command that
		// still has an error of its own is the one Redis refused.
		return true, execErr, fmt.Errorf("redislease: Redis refused a queued command (unknown, or with the wrong number of arguments), so it ran none of the transaction, nothing was applied: %w%s", execErr, firstFailed(cmds, "the first refused", execErr))
	case errors.Is(execErr, redis.Nil) && firstFailed(cmds, "", nil) == "":
		return true, nil, g.applied(ctx, tx, "commit", t) // only redis.Nil replies (a GET of a missing key)
	case !errors.As(execErr, &rerr):
		return true, execErr, execErr // no answer: the outcome is unknown
	}
	return true, execErr, fmt.Errorf("%w%s: %w", ErrCommandFailed, firstFailed(cmds, "", nil), execErr)
}

// firstFailed names the first of cmds that failed (redis.Nil is no failure,
// nor is an error equal to except, the transaction's own), as ": <label>
// <command>", or "" if none did.
func firstFailed(cmds []redis.Cmder, label string, except error) string {
	for _, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) && (except == nil || err.Error() != except.Error()) {
			if label != "" {
				label += " "
			}
			return fmt.Sprintf(": %scommand %q", label, c.String())
		}
	}
	return ""
}

// refuse appends the refusal of t to the log, in a MULTI/EXEC under the
// WATCH that judged it, by a script that judges again. It returns whether
// it is done, the transaction's own error, and the error for Commit.
func (g *Gate) refuse(ctx context.Context, tx *redis.Tx, t, floor leasefence.Token) (bool, error, error) {
	var cmd *redis.Cmd
	_, execErr := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
		// EVAL, not EVALSHA: inside MULTI a missing script would fail at EXEC.
		cmd = refuseScript.Eval(ctx, p, []string{g.floorKey, g.logKey}, fenceArg(t.Fence), t.Holder, g.retain)
		return nil
	})
	if errors.Is(execErr, redis.TxFailedErr) {
		return false, execErr, nil
	}
	if execErr != nil {
		return true, execErr, g.notLogged(t, floor, execErr)
	}
	res, err := cmd.Slice()
	if err != nil {
		return true, nil, g.notLogged(t, floor, err)
	}
	r := reply(res)
	if r.str(0) == "admitted" && r.err == nil {
		return false, nil, nil // the floor changed under the WATCH after all: judge again
	}
	rej := leasefence.Rejection{
		Seq: uint64(r.int(1)), Resource: g.resource, Holder: t.Holder, Fence: t.Fence,
		FloorFence: r.fence(2), FloorHolder: r.str(3),
	}
	if r.err != nil {
		return true, nil, g.notLogged(t, floor, r.err)
	}
	return true, nil, leasefence.RejectionError(rej)
}

// notLogged is the refusal of t, judged against floor, whose logging
// failed: Seq 0, and why.
func (g *Gate) notLogged(t, floor leasefence.Token, why error) error {
	rej := leasefence.Rejection{Resource: g.resource, Holder: t.Holder, Fence: t.Fence, FloorHolder: floor.Holder, FloorFence: floor.Fence}
	return fmt.Errorf("%w (not logged: %v)", leasefence.RejectionError(rej), why)
}

// Admit raises the floor to t without writing anything, in one script: the
// coordinator's push of a new fence at reassignment. A token below the floor
// (or the floor's fence under another holder) changes nothing, is not
// logged, and is refused with Seq 0.
func (g *Gate) Admit(ctx context.Context, t leasefence.Token) error {
	if err := g.check(ctx, t); err != nil {
		return err
	}
	res, acked, err := g.runAdmit(ctx, t)
	if err != nil {
		return err
	}
	r := reply(res)
	if r.str(0) == "admitted" {
		if r.err != nil {
			return r.err
		}
		return g.admitted(t, acked)
	}
	rej := leasefence.Rejection{Resource: g.resource, Holder: t.Holder, Fence: t.Fence, FloorFence: r.fence(1), FloorHolder: r.str(2)}
	if r.err != nil {
		return r.err
	}
	return leasefence.RejectionError(rej)
}

func (g *Gate) check(ctx context.Context, t leasefence.Token) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: gate call with a nil context", leasefence.ErrInvalidRequest)
	case t.Resource != g.resource:
		return fmt.Errorf("%w: token %v at the gate of %q", leasefence.ErrWrongResource, t, g.resource)
	case t.Fence == 0 || t.Fence > MaxFence:
		return fmt.Errorf("%w: token %v: fence outside [1, MaxFence]", leasefence.ErrInvalidRequest, t)
	}
	if err := leasefence.ValidateID(leasefence.IDHolder, t.Holder); err != nil {
		return fmt.Errorf("token %v: %w", t, err)
	}
	return ctx.Err()
}

// Floor returns the highest token admitted, or the zero Token if none.
func (g *Gate) Floor(ctx context.Context) (leasefence.Token, error) {
	if ctx == nil {
		return leasefence.Token{}, nilCtx("Floor")
	}
	t, _, err := g.parseFloor(g.rdb.HMGet(ctx, g.floorKey, "f", "h"))
	return t, err
}

// RejectionsSince returns the retained refusals whose Seq is above seq,
// oldest first, and how many refusals above seq the log no longer retains.
// The log lives in Redis with the floor: a restart without the AOF loses
// both, and the next refusal is numbered 1 again, so a reader's cursor from
// before reads nothing until the count passes it (compare RejectionCount
// with the cursor to notice).
func (g *Gate) RejectionsSince(ctx context.Context, seq uint64) ([]leasefence.Rejection, uint64, error) {
	if ctx == nil {
		return nil, 0, nilCtx("RejectionsSince")
	}
	if seq == math.MaxUint64 {
		return nil, 0, ctx.Err()
	}
	msgs, err := g.rdb.XRange(ctx, g.logKey, strconv.FormatUint(seq+1, 10)+"-0", "+").Result()
	if err != nil {
		return nil, 0, err
	}
	rs := make([]leasefence.Rejection, 0, len(msgs))
	for _, m := range msgs {
		r, err := g.parseRejection(m)
		if err != nil {
			return nil, 0, err
		}
		rs = append(rs, r)
	}
	var missed uint64
	if len(rs) > 0 {
		missed = rs[0].Seq - (seq + 1)
	}
	return rs, missed, nil
}

// RejectionCount returns how many refusals were ever logged: the Seq of the
// newest, which the log always retains.
func (g *Gate) RejectionCount(ctx context.Context) (uint64, error) {
	if ctx == nil {
		return 0, nilCtx("RejectionCount")
	}
	msgs, err := g.rdb.XRevRangeN(ctx, g.logKey, "+", "-", 1).Result()
	if err != nil || len(msgs) == 0 {
		return 0, err
	}
	return parseSeq(msgs[0].ID)
}

func parseSeq(id string) (uint64, error) {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseUint(ms, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: refusal log entry %q", ErrCorruptKey, id)
	}
	return n, nil
}

func (g *Gate) parseRejection(m redis.XMessage) (leasefence.Rejection, error) {
	seq, err := parseSeq(m.ID)
	if err != nil {
		return leasefence.Rejection{}, err
	}
	field := func(k string) string { s, _ := m.Values[k].(string); return s }
	fence, err1 := strconv.ParseUint(field("fence"), 10, 64)
	floor, err2 := strconv.ParseUint(field("floorFence"), 10, 64)
	if err1 != nil || err2 != nil {
		return leasefence.Rejection{}, fmt.Errorf("%w: refusal log entry %s: %v", ErrCorruptKey, m.ID, m.Values)
	}
	return leasefence.Rejection{
		Seq: seq, Resource: g.resource, Holder: field("holder"), Fence: leasefence.Fence(fence),
		FloorHolder: field("floorHolder"), FloorFence: leasefence.Fence(floor),
	}, nil
}
