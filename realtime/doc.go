// Package realtime runs a spec.Scenario in real time against real
// systems, and judges it by the same checker as the simulator.
//
// Each agent is the same state machine the simulator drives (package
// agent), driven here on goroutines and real clocks: its timers are real
// sleeps, its requests real calls, its writes real commits. Each calls a
// leasefence.Service (a
// Backend: the in-memory coordinator behind leasefence.Local,
// etcdlease's Coordinator on an embedded or existing etcd, or redislease's
// on a throwaway or existing Redis, whose naive mode is the classic SET NX
// PX lock) through a fault layer, and writes to resources behind a real
// gate (a Store: in-memory leasefence.FenceGate, sqlgate on a SQLite file,
// etcdlease's Gate, redislease's with a stream as the record, or a
// FenceGate behind a real HTTP server on a loopback port).
// Everything they do, and everything the coordinator is seen to do, is an
// event of one history (package history), which history's checker judges
// from nothing else: the same events, the same file (lab run --events),
// the same report as a simulated run.
//
// # Adapters
//
// The runner names no real system. The in-memory backend and store are
// its own; every other is an adapter in a package of its own below it
// (realtime/etcdbackend, realtime/redisbackend, realtime/sqlitestore,
// realtime/httpstore; the library contenders in realtime/etcdmutex and
// realtime/redislocks), which registers what opens it under its registry
// name (adapter.go: BackendAdapter, StoreOpener, ContenderOpener). What
// an adapter differs in, it states through optional interfaces the
// runner asks for (Describer, CoarseRetryHinter, RestartChecker,
// LeaseKeeper, FloorKeeper, MemberBackend), never by its type. A program
// links the adapters it runs (realtime/adapters links them all);
// Config.Check refuses one it does not link, by name (ErrNotLinked).
//
// # Faults, mapped onto the real world
//
//   - A stall between the check and the write is a real sleep, in which
//     the agent does nothing at all, renewals included.
//   - Request and reply drops, delays and duplicates are the fault layer
//     around the Service calls (net.go), their fates drawn by the agent as
//     in the simulator. A dropped reply means the call happened and its
//     answer was thrown away, so the retry of the same request tests the
//     service's idempotency for real; a duplicate is delivered again after
//     the original. Every fate is counted (FaultStats).
//   - The gate push is the coordinator's: a fence is pushed when it is
//     minted, whether or not the grant's reply then reaches the agent.
//   - Clock drift and offset: each agent's leasefence.NewClock reads the
//     monotonic clock since the run began, at the agent's rate, from its
//     offset. On the in-memory backend the coordinator's drift is played
//     too; etcd keeps its own time, so a coordinator drift is refused there.
//   - A partition cuts one agent's calls (both ways) for a window.
//   - A coordinator restart replaces the in-memory coordinators, resuming
//     after the last fence (persist) or from zero, their leases forgotten;
//     on an embedded etcd it stops every member and starts it again on its
//     data directory (persist), or starts a fresh cluster on a new
//     directory (a restore without --bump-revision: revisions, and so
//     fences, start over); on Redis it restarts redis-server on its
//     append-only file (persist) or on nothing; on PostgreSQL it crashes a
//     server of the run's own and starts it again on its data. A restart
//     on the server's data keeps the leases too (LeaseKeeper: etcd, Redis,
//     PostgreSQL): recorded as the server's restart, not the
//     coordinator's, so that the checker goes on holding every lease to
//     its expiry across it.
//   - The faults of the backend's own servers (the scenario's faults
//     list: an etcd member paused or cut off, the Redis primary paused,
//     killed or partitioned) are the backend's adapter's to play, through
//     one optional interface (FaultPlayer); the runner schedules every
//     entry alike (TimedFaults) and records it by its fault_began and
//     fault_ended alone, which the report's fault lines are read from.
//
// Every fault played is recorded in every mode as a fault_began event (its
// spec.Faults kind, and the agent or target it befalls) and, when a window
// ends, a fault_ended: partitions, restarts (before the
// coordinator_restarted the checker reads, unless the restart kept the
// leases) and member faults alike.
//
// The choices (which call is dropped, how long a stall lasts, which
// resource an agent picks) come from seeded generators drawn as the
// simulator draws them, so a seed gives the same choices in both modes and
// in every run; when things happen is real, and not deterministic.
//
// # In virtual time
//
// Every timed thing the runner does (an agent's timer, a message's delay
// on the wire, a script's action, a push's delay, a partition's window, a
// restart) is an entry of one queue (timers.go), fired by one goroutine in
// the order of its instant, then its agent (the run's own faults first),
// then the order it was armed in; an entry due at or after the run's end
// never fires. In real time that is the order things come due in anyway.
// Inside a testing/synctest bubble (package realtime/virtualtest, for
// tests: the lab's binary links no package testing) the clock is virtual
// and many entries come due at one instant: Options.Settle (synctest.Wait)
// lets each fired entry run until it waits before the next fires, so a
// seed gives one history, and a minute of a scenario takes a fraction of a
// second. Nothing else differs: the same agents, fault layer, records and
// checker, a Redis-based lock on an in-memory Redis reached through its
// client's Dialer. So that a bubble's clock can go on, nothing of the
// runner waits on a sync.Mutex while a call to a lock waits on the clock
// (a restart waits for the calls it concerns on a channel-based lock,
// rwGate); a lock that does (a mutex held across a sleep, a real socket)
// stops the bubble's clock, and Abandon, called from outside the bubble
// once Fired stands still on the wall clock, ends the run naming the calls
// under way, the scenario and the seed, with its history kept.
//
// # Across a network
//
// On the http store (realtime/httpstore) every resource is a server of its own, fencehttp.Require
// in front of its gate, and the coordinator signs each grant's proof
// (the store is a ProvingStore: its Prover is the backend's). An agent's
// write carries its lease in its context (WithLease), whose proof the
// store's transport stamps on the request; a refusal comes back 409 and is
// read as the gate's own error. network.write_delay holds each write
// request on the wire before it reaches the server (a stream of its own
// per agent, so both modes draw the same delays). Forgers (forger.go)
// write beside the agents with proofs the store makes up (ForgingStore);
// their refusals are events, their landings come from the resource's
// record like any other. The core itself knows no proof's format. Forgers
// and a write delay are refused on any other store (spec.ErrOverTheWire).
//
// # Time scale
//
// Scale stretches every time of a scenario by one factor. etcd's lease
// TTLs are whole seconds, and etcd raises a TTL below its minimum (1.5
// election timeouts: under 1 s on the embedded cluster, 2 s with etcd's
// default timing) to that minimum. So on etcd a scenario is stretched by
// the smallest factor that makes its TTL a whole number of seconds of at
// least the cluster's minimum (WholeSecondScale; the minimum is asked of
// the cluster), and its stalls, delays and run length with it, so that the
// scenario keeps its shape: a 1 s TTL runs as is, a 500 ms TTL at twice
// its times, a 1.5 s TTL at 4/3. A factor above MaxTimeScale is refused
// (ErrUnmappable), and so is a chosen factor that misses whole seconds.
// The history is in wall-clock time, and its header carries the stretched
// TTL and skew budget.
//
// # How the history is kept honest
//
// The runner serialises nothing of the system under test: agents send
// their writes to the gates concurrently, as real processes would. Each
// resource records every write that landed on it in the same operation as
// the write (a list appended under the in-memory gate's lock, a row of the
// SQLite writes table in the gate's transaction with the database's own
// sequence, a key in the etcd transaction ordered by its revision), and
// the history's landings are built from that record once the run is over
// (record.go): the order is the resource's, never the runner's. Every
// other event is stamped as it happens, the history is every event in the
// order of its instant, and only then is it judged and handed to the
// subscribers. A deliberately broken check-then-set gate is caught this
// way (broken_test.go). The coordinator's side is recorded as the calls
// pass it, before the fault layer decides the reply's fate, and acquires
// pass it concurrently: a grant is recorded at the instant the coordinator
// stamped it with, and grants in the order of their fences. A store error on a write (its fate unknown) is a
// library_error, which fails the run. An expiry is recorded when the
// coordinator is seen to have let a lease go: a renewal refused as
// expired, or the next grant on the resource.
//
// # The dashboard
//
// Live is a run as the dashboard (tui.Source) sees it: snapshots folded
// from the run's own events (history.AgentTrack, history.Reader), drop
// rate, stalling an agent and coordinator restarts. Steps, speed and
// toggling the gate push are refused (ErrRealTime): real time cannot be
// stepped. Nor can it pause (Live.RealTime says why): the dashboard
// freezes its picture while the run goes on.
//
// # What it cannot fault
//
// The network between etcd members is not partitioned, and messages
// between them are neither dropped nor delayed: the faults sit between the
// agents and the coordinator. A leader can be stopped (etcdbackend's Etcd.Cluster), and
// restarts stop whole clusters. etcd's own lease timing (expiry checked by
// the leader about every half second; every lease reset to its full TTL on
// a leader change) is etcd's.
package realtime
