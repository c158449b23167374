// Package leasefence makes a resource able to refuse a writer that still
// believes it holds a lease it has lost.
//
// Two agents can both believe they hold the same lease. A holder can never
// close the gap between "my lease is still valid" and "my write lands",
// because it cannot see its own stall: a GC pause, a model call, a slow disk.
// So the resource itself refuses the stale writer. Each acquisition mints a
// strictly higher fence, and the FenceGate at the resource admits a write only
// if its fence is not below the highest fence it has admitted, with the check
// and the write as one operation, and logs every refusal as evidence that two
// holders overlapped.
//
// # The pieces
//
//   - Coordinator grants leases and mints fences from one global counter.
//     Renewal keeps the fence; acquisition after expiry or release mints a
//     higher one. An expired lease is never resurrected, a holder is never
//     given a second lease on what it holds, and a retried acquire (same
//     request id) gets the grant already made rather than a new fence.
//   - Client stamps each request at the instant it is sent and is the only
//     thing that turns a grant into a Lease: Deadline = sentAt + TTL -
//     ClockSkew. The coordinator dates the lease from when it processed the
//     request, which is later, so the holder's window always lies inside the
//     coordinator's.
//   - FenceGate sits at the resource: Commit(ctx, token, write) raises the
//     floor and runs write as one operation, or refuses and logs.
//   - Service is a coordinator behind ctx-aware calls that may cross a
//     network (Local wraps the in-memory Coordinator; package etcdlease puts
//     one on etcd). Hold acquires through a Service, waiting out other
//     holders and resending a request whose reply was lost, then renews in
//     the background; its Session ends (Lost, Err, Context, each reading
//     the clock when called) when a renewal is refused or the holder's own
//     send-anchored deadline passes unrenewed. TryHold makes one attempt;
//     HolderReader says who holds a resource.
//   - Every time is an Instant of one Clock's Domain. Relating instants of two
//     clocks is a *ClockDomainError, never a wrong number, and a clock source
//     that steps backwards is refused with a *ClockError.
//
// The package does no I/O and reads time only through the Clock it is given.
// Requests, grants and outcomes are plain data (they marshal to JSON):
// sending, retrying and timing them out is the caller's job, which is also why
// the send instant is captured explicitly by BeginAcquire and BeginRenewal.
//
// # Guarantees
//
//   - Fences issued by one Coordinator strictly increase, across resources.
//   - At most one holder has a live lease on a resource at the coordinator.
//   - For any round trip (send <= process <= reply), clocks running at the
//     same rate and ClockSkew >= 0, the holder's deadline mapped to true time
//     is at or before the coordinator's expiry.
//   - A FenceGate never runs two admitted writes at once, never admits a
//     fence below one it admitted, and logs every refusal with both holders
//     and both fences. Its Commits, Admits and Floor readings are
//     linearizable against a fenced register (checked with porcupine in the
//     tests, beside a check-then-set gate that the same check catches).
//   - Each write callback gets a context of its own, made for that write
//     and never reused: a goroutine that keeps it (an HTTP transport's, say)
//     sees that write's values and, once the write returns, Canceled. A
//     Commit with it is nested while the write runs (handled in place, even
//     from goroutines the write starts and waits for, one nested write at a
//     time) and refused once the write has returned.
//   - Bad arguments never wedge anything: a nil ctx or write, a malformed
//     token or request, an out-of-range option, and the zero FenceGate,
//     Coordinator and Client (ErrUninitialized) get a named error before any
//     state is touched, and no lock is left held. A panicking write leaves
//     the gate usable. Trace hooks run after the gate is given up.
//   - Coordinator, Client, FenceGate and the clocks are safe for concurrent
//     use. The package imports the standard library only.
//
// # Bounds
//
//   - TTL is at most MaxTTL (about 146 years) and ClockSkew at most
//     MaxClockSkew. An expiry or deadline that would overflow an Instant's
//     offset (int64 nanoseconds from its clock's origin) is refused with
//     ErrOutOfRange, never wrapped into the past: a coordinator whose clock
//     reads within TTL of the end of that range grants and renews nothing.
//   - Fences never wrap: once the coordinator has issued the highest Fence,
//     Acquire fails with ErrFencesExhausted.
//   - A lock-delay (CoordinatorOptions.LockDelay, and every store
//     coordinator's LockDelay) is at most MaxLockDelay (a day) unless
//     AllowLongLockDelay, and never negative: ValidateLockDelay is the one
//     rule. It is for a resource that cannot check a fence, and is a
//     probability, not a fence: a call landing later than the delay after
//     the expiry still lands.
//   - Holders, resources and request ids are non-empty, valid UTF-8 without
//     control characters and at most MaxIDLen (1 KiB) bytes: one rule
//     (ValidateID, ValidateToken, ValidateAcquire, ValidateRenew) that the
//     client, the coordinators, every gate, in memory or on a store, and
//     the signer of proofs apply before they send or store anything,
//     answering an *IDError. MaxIDLen says why 1 KiB and why no control
//     characters.
//   - The coordinator's replay cache holds at most MaxReplayCache grants,
//     the client's request record is bounded by RequestRecord, and a gate
//     retains the newest WithRejectionLog (default DefaultRejectionLog)
//     refusals while RejectionCount counts them all; RejectionsSince reads
//     the log by sequence number and says how many were missed. Memory is
//     flat however long they run.
//
// # Known limits
//
// These are properties of the design, not bugs:
//
//   - Fencing catches a stale write only after the newer holder has written
//     (or the coordinator has pushed the new fence with FenceGate.Admit). If
//     the stale holder writes first, the floor has not moved and the write is
//     admitted. Admit closes most of that window, but the push is itself a
//     message that can be delayed or lost: fencing bounds the damage from a
//     stalled holder; it does not make the handover atomic.
//   - Nothing is persistent. A coordinator that restarts at fence 1 reissues
//     fences the resource has already superseded, and every write of the new
//     holder is refused. CoordinatorOptions.StartFence, Coordinator.IssuedFence
//     and WithInitialFloor are the hooks; persisting is the caller's job.
//   - One coordinator, no consensus: no replication, quorum or leader election.
//   - No transport: see above. Package etcdlease removes these three limits
//     (persistence, consensus, transport) by putting the coordinator and a
//     gate on etcd; the others remain.
//   - ClockSkew is an assumption, not a measurement. It reserves room for
//     drift you already estimated; it cannot detect a clock drifting faster
//     than assumed.
//   - The send-time anchor assumes a request is not processed before it is
//     sent. A request serialised and replayed much later yields a deadline
//     anchored in the past: safe (the lease is shorter), but maybe dead on
//     arrival.
//   - The coordinator remembers the last ReplayCache (default 1024) acquire
//     grants. A retry whose entry was evicted is answered as a fresh
//     acquisition would be: "already-held" while the holder's lease is live
//     (no fence burned; the holder keeps the grant it may have lost), and a
//     new grant under a new fence once it is not (where a remembered retry
//     would have been "stale-request"). A Client remembers its last
//     RequestRecord (default 1024) requests; completing an older one is
//     ErrUnknownRequest.
//   - A write context that escapes its write is misuse, and a nested
//     Commit must pass the context of the write it runs in: a nested
//     write that commits with its enclosing write's context waits for
//     itself until that context ends.
//   - Each Commit's write has a context of its own (64 bytes, never
//     reused), carved from a chunk the gate allocates once per 8 writes;
//     an uncontended Commit is still several times slower than a bare
//     mutex-guarded call; see bench/README.md for the figures.
//   - Lease.HasExpired and FenceGate.WouldAdmit are advisory: they answer
//     about the instant they are called. Nothing stops a caller from branching
//     a write on them and reintroducing the check-to-write gap by hand. There
//     is deliberately no AssertValid.
//
// # Observation
//
// CoordinatorTrace, ClientTrace and GateTrace are optional hooks, in the
// spirit of net/http/httptrace, that report every acquire, renew, release,
// request, completion, commit and admit with its token, outcome and instant.
// They cost a nil check when unset, and import nothing beyond the standard
// library; the module github.com/leasefence/lab/leasefence/leaseotel
// turns them into OpenTelemetry spans and metrics, on the OpenTelemetry API
// alone.
//
// # One call
//
// etcdlease.Lock and redislease.Lock take a lock in one call: they make
// the coordinator and a Client with defaults (NewLockClient: a holder
// named by DefaultHolder, a tenth of the TTL kept as ClockSkew) and call
// Hold; the Session's Release also closes what they started
// (HoldOptions.OnRelease). A write under any session goes through a gate
// with its token: gate.Commit(ctx, session.Token(), ...).
package leasefence
