package redislease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
)

// ErrNotReplicated: a write that Redis applied on the primary, but that
// fewer replicas than Replication.Replicas acknowledged within
// Replication.Timeout. The write stands on the primary, and a failover to a
// replica that missed it loses it. The concrete error is *ReplicationError.
var ErrNotReplicated = errors.New("redislease: applied on the primary, not acknowledged by enough replicas")

// Replication asks Redis to WAIT for replicas after every write that
// safety rests on: each fence minted (Acquire's grant, and a retried
// request answered with its grant) and each Commit or Admit that applied
// anything (the raise of a gate's floor with the caller's commands).
//
// WAIT makes a write survive a failover only if the Sentinels promote one
// of the replicas that acknowledged it: with Replicas equal to the number
// of replicas, every one did; with fewer, Sentinel promotes the replica
// with the most data, which usually, not always, is one of them. It does
// not make Redis strongly consistent: a primary cut off from its replicas
// still applies writes, and answers them with ErrNotReplicated.
type Replication struct {
	// Replicas is how many replicas must acknowledge each such write; 0
	// means no WAIT (the default: Redis replicates asynchronously).
	Replicas int
	// Timeout is how long one WAIT may block: whole milliseconds, >= 1ms
	// when Replicas > 0. Keep it below the client's ReadTimeout.
	Timeout time.Duration
}

func (r Replication) enabled() bool { return r.Replicas > 0 }

// check validates r for client rdb; name is the options' field.
func (r Replication) check(name string, rdb redis.UniversalClient) error {
	if r.Replicas == 0 {
		if r.Timeout != 0 {
			return fmt.Errorf("%w: %s.Timeout %v with no Replicas to wait for", leasefence.ErrInvalidRequest, name, r.Timeout)
		}
		return nil
	}
	if r.Replicas < 0 {
		return fmt.Errorf("%w: %s.Replicas %d is negative", leasefence.ErrInvalidRequest, name, r.Replicas)
	}
	if err := wholeMillis(name+".Timeout", r.Timeout); err != nil {
		return err
	}
	// WAIT counts the replicas that acknowledged the writes made on its own
	// connection: it must follow the write on the same one, which only a
	// single-node client (redis.NewClient, redis.NewFailoverClient)
	// promises for a pipeline.
	if _, ok := rdb.(*redis.Client); !ok {
		return fmt.Errorf("%w: %s needs a *redis.Client (redis.NewClient or redis.NewFailoverClient), not a %T: WAIT must follow the write on its connection", leasefence.ErrInvalidRequest, name, rdb)
	}
	return nil
}

// ReplicationError is a write applied on the primary that too few replicas
// acknowledged in time. It matches ErrNotReplicated. What is known: Redis
// applied the write (Op, Fence) and answered; Acked replicas had it when
// WAIT returned. What is not: whether the replica a failover would promote
// has it.
type ReplicationError struct {
	Op       string // "acquire" or "commit" or "admit"
	Resource string
	Holder   string
	Fence    leasefence.Fence
	Acked    int // replicas that acknowledged it
	Wanted   int // Replication.Replicas
	Timeout  time.Duration
}

func (e *ReplicationError) Error() string {
	what := "the write under " + fmt.Sprintf("%s@%d", e.Holder, e.Fence)
	if e.Op == "acquire" {
		what = fmt.Sprintf("the grant of fence %d to %s", e.Fence, e.Holder)
	}
	return fmt.Sprintf("redislease: %s on %q: %s is applied on the primary, but %d of %d replicas acknowledged it within %v: a failover may lose it",
		e.Op, e.Resource, what, e.Acked, e.Wanted, e.Timeout)
}

// Is reports whether target is ErrNotReplicated.
func (e *ReplicationError) Is(target error) bool { return target == ErrNotReplicated }

// evalWait runs s and, on the same connection, WAIT: one round trip. It
// returns the script's command and how many replicas acknowledged.
func evalWait(ctx context.Context, rdb redis.UniversalClient, r Replication, s *redis.Script, keys []string, args ...any) (*redis.Cmd, int, error) {
	run := func(load bool) (*redis.Cmd, *redis.Cmd) {
		var ev *redis.Cmd
		var wait *redis.Cmd
		_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			if load {
				ev = s.Eval(ctx, p, keys, args...)
			} else {
				ev = s.EvalSha(ctx, p, keys, args...)
			}
			wait = r.wait(ctx, p)
			return nil
		})
		return ev, wait
	}
	ev, wait := run(false)
	if redis.HasErrorPrefix(ev.Err(), "NOSCRIPT") {
		ev, wait = run(true)
	}
	if err := ev.Err(); err != nil {
		return ev, 0, err
	}
	n, err := wait.Int()
	return ev, n, err
}

// processor is a pipeline, or a transaction's connection.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// wait sends WAIT on c. Not go-redis's Wait, which Pipeliner lacks: the
// reply is read within the client's ReadTimeout, hence Timeout's bound.
func (r Replication) wait(ctx context.Context, c processor) *redis.Cmd {
	cmd := redis.NewCmd(ctx, "wait", r.Replicas, r.Timeout.Milliseconds())
	_ = c.Process(ctx, cmd)
	return cmd
}

// touchWait writes the counter without changing it (INCRBY 0) and WAITs on
// the same connection: WAIT then covers every write before it in the
// replication stream, such as a grant an earlier call made.
func touchWait(ctx context.Context, rdb redis.UniversalClient, r Replication, key string) (int, error) {
	var wait *redis.Cmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.IncrBy(ctx, key, 0)
		wait = r.wait(ctx, p)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return wait.Int()
}

// runAcquire runs the acquire script, and WAIT with it when replication is
// asked for; acked is how many replicas acknowledged (-1 without WAIT).
func (c *Coordinator) runAcquire(ctx context.Context, keys []string, args ...any) (res []any, acked int, err error) {
	if !c.repl.enabled() {
		res, err := acquireScript.Run(ctx, c.rdb, keys, args...).Slice()
		return res, -1, err
	}
	ev, acked, err := evalWait(ctx, c.rdb, c.repl, acquireScript, keys, args...)
	if err != nil {
		return nil, 0, err
	}
	res, err = ev.Slice()
	return res, acked, err
}

// replicated checks that a grant of fence reached enough replicas: acked
// from the WAIT sent with a fresh grant, or, for a replay (acked < 0 while
// replication is asked for), from a WAIT sent now, behind the grant.
func (c *Coordinator) replicated(ctx context.Context, req leasefence.AcquireRequest, fence leasefence.Fence, acked int) error {
	if !c.repl.enabled() {
		return nil
	}
	if acked < 0 {
		var err error
		if acked, err = touchWait(ctx, c.rdb, c.repl, c.keys.counter()); err != nil {
			return err
		}
	}
	if acked >= c.repl.Replicas {
		return nil
	}
	return &ReplicationError{Op: "acquire", Resource: req.Resource, Holder: req.Holder, Fence: fence, Acked: acked, Wanted: c.repl.Replicas, Timeout: c.repl.Timeout}
}

// applied is what a Commit or Admit does once Redis applied t's write: it
// notes t's floor in the watermark, and WAITs on conn (the connection that
// wrote) when replication is asked for.
func (g *Gate) applied(ctx context.Context, conn processor, op string, t leasefence.Token) error {
	g.watermark.sawFloor(g.counterKey, g.floorKey, t)
	if !g.repl.enabled() {
		return nil
	}
	n, err := g.repl.wait(ctx, conn).Int()
	if err != nil {
		return fmt.Errorf("redislease: %s on %q applied on the primary; WAIT for its replicas failed: %w", op, g.resource, err)
	}
	if n >= g.repl.Replicas {
		return nil
	}
	return &ReplicationError{Op: op, Resource: g.resource, Holder: t.Holder, Fence: t.Fence, Acked: n, Wanted: g.repl.Replicas, Timeout: g.repl.Timeout}
}

// runAdmit runs the admit script, with WAIT on the same connection when
// replication is asked for; acked is how many replicas acknowledged (-1
// without WAIT).
func (g *Gate) runAdmit(ctx context.Context, t leasefence.Token) (res []any, acked int, err error) {
	keys, args := []string{g.floorKey}, []any{fenceArg(t.Fence), t.Holder}
	if !g.repl.enabled() {
		res, err := admitScript.Run(ctx, g.rdb, keys, args...).Slice()
		return res, -1, err
	}
	ev, acked, err := evalWait(ctx, g.rdb, g.repl, admitScript, keys, args...)
	if err != nil {
		return nil, 0, err
	}
	res, err = ev.Slice()
	return res, acked, err
}

// admitted is what Admit does once the script admitted t: it notes t's
// floor in the watermark, and checks that acked replicas are enough.
func (g *Gate) admitted(t leasefence.Token, acked int) error {
	g.watermark.sawFloor(g.counterKey, g.floorKey, t)
	if !g.repl.enabled() || acked >= g.repl.Replicas {
		return nil
	}
	return &ReplicationError{Op: "admit", Resource: g.resource, Holder: t.Holder, Fence: t.Fence, Acked: acked, Wanted: g.repl.Replicas, Timeout: g.repl.Timeout}
}
