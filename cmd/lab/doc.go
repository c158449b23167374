// Lab is a laboratory for leases with fencing tokens: it runs many agents
// that take leases on shared resources, through faults (stalls longer than
// the lease, lost and duplicated messages, clock drift, partitions,
// coordinator restarts), in two modes on the same faults: naive (check
// "now < expiresAt", then write) and fenced (write through the resource's
// leasefence.FenceGate). It shows, counts and checks what each mode let
// through.
//
// Usage:
//
//	lab [command] [arguments]
//
// The commands are:
//
//	watch       the live dashboard, naive and fenced side by side (the default command)
//	run         one headless run: a report per mode, or JSON, or an HTML page
//	swarm       many seeds with fault knobs drawn per seed, on all cores
//	check       judge a history file (lab run --events) again: the same report
//	fixtures    run every fixture file of a directory, as tests
//	scenarios   list the built-in scenarios
//	contenders  list the contenders: the locks a run compares
//
// Every command takes --help. Flags and arguments may come in any order
// (`lab run gap --seed 3` or `lab run --seed 3 gap`); usage and errors go to
// standard error.
//
// # lab, lab watch
//
//	lab watch [scenario|file] [--speed X] [--mode M] [--save PATH] [knob flags]
//
// The dashboard: both modes on one virtual clock, paced to wall time (speed
// in virtual seconds per wall second, 1 by default), with pause, single
// steps and live interventions (stall an agent, drop messages, restart the
// coordinator, toggle the gate push; ? lists the keys). The default
// scenario, overlap, refuses a stale write within its first two seconds;
// the dashboard pauses by itself there, once, saying why (space resumes).
// --save writes the scenario with your interventions to a file, which
// `lab run` replays exactly. When standard output is not a terminal (a
// pipe, CI), there is no dashboard: the scenario runs headless and the
// report of `lab run` is printed, with its exit status.
//
// # lab run
//
//	lab run [scenario|file] [--mode fenced|naive|both] [--json] [--html PATH] [--events PATH]
//	        [--trace otlp|otlp-http|otlp-grpc[=URL]|file=PATH|none] [--swarm] [knob flags]
//	lab run [scenario|file] --backend B [--stop-at-first] [...]
//	lab run [scenario|file] --lock-delays LIST [--seeds N] [--json] [--html PATH] [knob flags]
//	lab run battery [--contenders NAME,...] [--backend B] [--stop-at-first] [--json]
//
// One run, as fast as it goes. The text report has a column of counters
// per mode, the first counterexamples of each mode (when, which resource,
// which holders and fences, what happened), the verdict, the digest, and a
// paragraph on how to read it. A long run draws a progress bar on standard
// error when that is a terminal.
//
// --html writes a self-contained page (no scripts, no external assets): one
// lane per agent over virtual time showing when it held a lease, believed
// in a lease the coordinator had let go, stalled and waited; partitions,
// lost messages and coordinator restarts; every write as a mark (a circle
// landed, a cross refused, a triangle landed stale), each refused or stale
// write linked to the newer write that outranked it; naive above fenced.
// Shapes and patterns carry every distinction, so it reads without colour.
// A mode of more than 100,000 events is drawn over a window, its first
// 100,000 events: the page says so, and counts the writes, refusals,
// pushes and faults after it (the counters above the lanes are the
// checker's, of the whole history).
//
// --trace sends the run to OpenTelemetry: one trace per lease generation,
// timestamped from the wall time of the run's start plus virtual time (see
// package tracing; the exporters are package tracing/otelexport). OTLP
// respects OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL and
// OTEL_SERVICE_NAME; a local Jaeger takes
// `--trace otlp=http://localhost:4318`. Spans are flushed before the command
// exits, Ctrl-C included; spans a collector did not take are counted on
// standard error, and never fail the run.
//
// --events writes the run's history to a file (the format is below): every
// event of every mode, which `lab check` judges again. Only a run that asks
// for it pays for writing it.
//
// --swarm runs the scenario `lab swarm` runs for the seed: the base scenario
// (the argument and the knob flags) with its fault knobs drawn from --seed
// by harness.SwarmScenario, but for the knobs a flag fixed. It is how a
// failing swarm seed is reproduced; the report's description ends with what
// the seed drew.
//
// --lock-delays 0,1s,2s,4s runs the scenario with each lock-delay (its
// lock_delay) for --seeds seeds from --seed, on the simulator or, with
// --backend memory, etcd or redis, in real time (a run of its own per delay
// and seed), and prints one table (--json: its rows) of what each delay
// buys and costs, per mode
// summed over the seeds: stale writes landed, idle time while someone
// waited (idle_while_waiting_ms) and writes landed; --html writes the table
// and a plot of the trade-off to a page. The built-in lock-delay
// is made for it: its naive mode is a resource that cannot check a fence.
//
// --stop-at-first ends a real-time run (a real --backend, its agents
// in-process) at the first counterexample of a lock's own safety (mutual
// exclusion, the lease contract), which realtime.LockWatch spots in the
// events as they happen: the report covers what ran up to it, its
// INTERRUPTED line names the mode whose lock finding broke, standard
// error says where it stopped, and the exit status is the run's (1, the
// lock broke). What ran is judged by the checker as any run's history is:
// the watch only decides when to stop. The simulator, which runs a
// scenario whole in a fraction of a second, agents as processes (whose
// events the watch does not hear) and --lock-delays refuse it.
//
// lab run battery runs the default battery (spec.Battery, the one
// labtest.Check runs) on the contenders: each scenario's report, a line per
// scenario on standard error, and each contender's findings summed over
// the battery with its verdict. --json prints {"battery": [each
// scenario's report, as lab run --json prints it], "left_out": [{scenario,
// contender, why}: a scenario a contender or the backend cannot play],
// "contenders": {NAME: {findings, verdict}}}. --stop-at-first ends a run at
// the first counterexample of a lock's own safety, and the battery with
// it. It exits 1 when a contender's lock finding is broken over the
// battery or a fenced contender's writes are.
//
// # Real backends
//
//	lab run|watch|fixtures ... [--backend sim|memory|etcd|redis] [--resource memory|sqlite|etcd|http|redis]
//	        [--etcd-members N | --etcd-endpoints URL,...] [--redis-url URL] [--time-scale K]
//	        [--redis-topology single|sentinel] [--redis-wait-replicas N --redis-wait-timeout D] [--redis-watermark]
//	        [--agents-as in-process|process]
//
// --backend sim (the default) is the deterministic simulator. memory and
// etcd run the same scenario in real time (package realtime): agents are
// goroutines on real clocks, calling the in-memory coordinator
// (leasefence.Local) or etcdlease's coordinator on etcd through a seeded
// fault layer, and writing through a real gate; the history they emit is
// judged by the same checker, and --events, --html, --trace and --json work
// as for the simulator (the trace's spans are in wall time). On etcd the
// default is one embedded member on a temporary directory; --etcd-members 3
// an embedded three-member cluster, each member its own process behind
// proxies the run owns, so that a scenario's faults list can pause and
// partition members (docs/real-faults.md); --etcd-endpoints an existing cluster,
// with every key under a prefix fresh to the run and removed after (a
// cluster that is not embedded cannot be restarted, so scenarios with
// restarts are refused there). --resource picks where the gates live: the
// in-memory FenceGate, sqlgate on a temporary SQLite file, or etcdlease's
// gate (the default on etcd). In naive mode the agents still hold etcd
// leases, check them, and write the resource with no fence.
//
// --resource http puts each resource behind a real HTTP server on a
// loopback port (127.0.0.1, a port the system picks, closed when the run
// ends): fencehttp.Require verifies the Fence-Token header in front of an
// in-memory FenceGate, and the coordinator signs every grant's proof with
// an Ed25519 key made for the run. Agents write over HTTP; a stale write
// comes back 409 as the gate's *StaleFenceError. Given alone it runs on
// --backend memory (with --backend sim it is refused). Only there can a
// scenario have forgers (forgers: N, or a list of own_key, tampered,
// alg_none, replayed: writers presenting proofs they made up) and a
// network.write_delay (each write held on the wire before it reaches the
// server). The report counts forgeries_refused, forgeries_landed and
// forged_floors_moved; in fenced mode a forged write that lands is a
// violation. A fixture says resource: http.
//
// --backend redis starts a throwaway redis-server (found on PATH: Debian's
// redis-server package, which scripts/redis.sh installs) on loopback, a
// free port and a temporary directory, with AOF and appendfsync always;
// --redis-url uses an existing server, every key under a hash tag fresh to
// the run and removed after (it cannot be restarted by the lab). The naive
// mode holds the classic SET NX PX lock; the fenced mode redislease's
// coordinator, and by default redislease's gate in the same server
// (--resource redis). Restarts stop the server and start it on its AOF
// (persist), or kill it and start it on an empty directory.
//
// --redis-topology sentinel starts Redis as teams deploy it (package
// redisdeploy): a primary, two replicas and three Sentinels on loopback,
// the clients reaching the primary through the Sentinels (go-redis's
// NewFailoverClient); the gates then live outside Redis (--resource memory
// or sqlite), and the scenario's redis faults pause, kill or partition the
// primary until the Sentinels fail it over, then bring it back as a replica
// (docs/real-systems.md). --redis-wait-replicas N with --redis-wait-timeout D
// makes the fenced mode WAIT for N replicas after each fence minted and
// floor raised (redislease.Replication: a grant too few acknowledged is an
// error, never a lease), and --redis-watermark gives it a
// redislease.Watermark: the highest fence and floor it saw, kept outside
// Redis, so a counter a failover rewound is moved past, not reissued. A
// fixture says redis: {topology: sentinel, wait_replicas: 2, wait_timeout:
// 200ms, watermark: true}.
//
// The run lasts the scenario's --duration of wall time, times the time
// scale. etcd's TTLs are whole seconds of at least its minimum (asked of
// the cluster), so on etcd every time of the scenario is stretched by the
// smallest factor that makes the TTL such a whole number (1 for a 1s TTL,
// 2 for 500ms), at most 10; --time-scale chooses it (on memory it defaults
// to 1, and a factor below 1 runs a scenario faster than written). What
// cannot be mapped is refused in one line, exit 2: a TTL needing more than
// 10x, a chosen scale that misses whole seconds, a coordinator drift (etcd
// keeps its own time), a restart that loses the coordinator's state with
// the gates in the same etcd (the fresh cluster would take their floors
// along), recorded interventions.
//
// --agents-as process (or --agents process; lab run and lab fixtures, on
// etcd; a fixture says agents: process) runs each agent, in each mode, as an OS process of its
// own (package procdriver): this binary re-executed as a hidden
// subcommand, on the run's etcd, writing through the SQLite file or the
// etcd gate the processes share. A stall between check and write is a
// SIGSTOP of the whole process for the stall's length, renewals and all.
// A scenario's crashes (crashes: [{agent, at, restart}]) are SIGKILL of an
// agent's process and, after restart, a new one; only agents as processes
// play them, and the other runs refuse such a scenario. Dropped and
// duplicated messages, partitions, restarts and the gate push are refused
// there; the dashboard runs its agents in-process.
//
// The report says where the run happened and how long it took on the wall
// clock, and what the fault layer did; the JSON has "backend" and "real"
// (with "agents", and per mode "processes" started, paused and killed).
// Ctrl-C stops the agents where they are, prints the report of what ran,
// stops etcd and removes every temporary directory. lab watch --backend
// shows the real-time run in the dashboard. It cannot pause: the lock
// servers keep their own time, so stopping the agents would expire their
// leases. Space freezes the picture while the run goes on (the header says
// FROZEN and where the run is; once live again, the timeline marks the
// interval with =), and the first refusal freezes it by itself. ] and [
// change the drop rate of every agent's fault layer, s stalls the selected
// holder, r and R restart the coordinator (etcd: its members, or a fresh
// cluster); stepping, speed and the gate push are the simulator's. q or Ctrl-C ends the run
// and prints its report; etcd is stopped and the temporary directories
// removed. --speed and --save are the simulator's.
//
// # Knob flags
//
// watch, run and swarm take a flag for every knob of spec.Scenario.
// Flags are applied after the file or built-in, in the order given, so a
// flag always wins; a value out of range is an error naming the flag.
//
//	--seed N  --agents N  --resources N  --duration D  --pick random|fixed|round-robin
//	--ttl D  --skew D (every client's ClockSkew)
//	--think DIST  --stall DIST  --work-gap DIST  --writes N  --renew-at F  --release[=false]
//	--request-delay DIST  --reply-delay DIST  --drop-requests P  --drop-replies P
//	--duplicate P  --retry-after D  --max-retries N
//	--drift-ppm MIN:MAX (or one value)  --offset MIN:MAX  --coordinator-drift-ppm PPM
//	--partition AGENT@FROM-TO (repeatable)  --restart AT[:persist] (repeatable)
//	--push[=false]  --push-delay DIST  --push-drop P
//
// Durations are Go durations (950ms, 1.5s). A DIST is "50ms" (constant),
// "10ms-50ms" (uniform), or "10ms-50ms,5%:1.5s-4s" (uniform, but with
// probability 5% uniform in [1.5s, 4s] instead: a long tail). A list flag
// (--partition, --restart) replaces the file's list at its first use and
// adds to it after; "none" empties it.
//
// # Scenario and fixture files
//
// A scenario file is YAML whose keys are spec.Scenario's JSON names,
// starting from a built-in (`builtin: crowd`) or spelled out in full; a
// fixture file adds seeds and expectations on the report. Both are strict:
// unknown keys, wrong types and values out of range are errors naming the
// file, the line and the field, e.g.
//
//	fixtures/gap.yaml:7: scenario.network.drop_replies: must be a probability in [0, 1], got 1.5
//
// The format is documented in package scenario (go doc ./scenario). `lab
// run FILE` runs a scenario file, or a fixture file's scenario with its
// first seed, where the fixture runs (its backend, resource and agents)
// unless --backend, --resource or --agents-as says otherwise.
//
// # lab fixtures
//
//	lab fixtures [dir|file ...] [--junit PATH] [-v] [--jobs N]
//
// Runs every fixture file (*.yaml, *.yml) of the directories (default
// ./fixtures) and the files named: each fixture's scenario over each of its
// seeds, each expectation checked on every seed. One line per fixture,
// "PASS name (seeds, time)" or "FAIL ..." followed by each failed
// expectation as "file:line: seed S: field: want W, got G"; a file that
// does not load is "BROKEN name (file)" with its errors, and the others
// still run. The last line is "N passed, N failed" (a broken file counts as
// failed). --junit writes JUnit XML for CI. A fixture that names a real
// backend (`backend: etcd`, `backend: redis`, with `resource: sqlite` to
// choose its gates) runs on it, its seeds one after another, each on a
// fresh embedded cluster or server; --backend moves every fixture to one backend,
// and skips (SKIP, with the reason) those whose expectations need the
// simulator. In CI:
//
//	go run ./cmd/lab fixtures fixtures --junit out/junit.xml
//
// # lab swarm
//
//	lab swarm [scenario|file] --seeds N [--first-seed S] [--jobs J] [--shard I/N] [--json] [knob flags]
//	lab swarm --merge FILE... [--json]
//
// Runs N seeds, both modes each, on J goroutines (all cores by default),
// each seed with its own fault mix drawn from the seed (drops, duplicates,
// delays, drift and whether the skew budget covers it, long stalls,
// restarts, the push). A knob flag of one of those knobs fixes it for
// every seed, and the others are still drawn (each seed drawing them as it
// would have); --seed is refused (the seeds are --first-seed and after).
// It prints each seed whose fenced mode broke an invariant, with the
// command that reproduces it (`lab run ... --seed=S --swarm`), then a
// summary: the knobs fixed and the knobs drawn (--json: "fixed", the
// flags, and "drawn", the knobs), the seeds run, the fenced failures, the
// naive stale writes, the fenced refusals, the events and seeds per second,
// and each mode's first counterexample: the lowest seed on which the mode
// showed one (fenced: a broken invariant; naive: a stale write), how many
// seeds and how much wall time the swarm had spent when it was done, and
// the lab run line that reproduces it. A progress bar is drawn on standard
// error when it is a terminal.
//
// --shard I/N runs only slice I (0 to N-1, as a Kubernetes Indexed Job's
// JOB_COMPLETION_INDEX counts) of N: the seeds at positions I, I+N, I+2N,
// ... of the swarm, so that every shard starts on the first seeds. --merge
// reads the --json output of every shard, each exactly once, and prints
// the summary the unsharded swarm would have, seed for seed (the same
// failures, counts and first counterexamples; its wall time is the
// longest shard's, the shards taken to run side by side). Shards of other
// scenarios, knob flags or seed ranges are refused. docs/swarm.md shows a
// Kubernetes Indexed Job and a CI matrix.
//
// # lab check
//
//	lab check PATH [--json] [--html PATH] [--trace otlp|otlp-http|otlp-grpc[=URL]|file=PATH|none]
//
// Judges a history file with the checker alone, from its header and events:
// no scenario, no simulator, no gate. It prints the report `lab run` prints
// (the same counters, counterexamples, verdict and digest; --json the same
// JSON), so `lab check` of what `lab run --events` wrote agrees with the run
// byte for byte; a history from another runner is judged the same way.
// The file is read as it is judged, event by event, and no event is kept:
// a history of any length is checked in memory in proportion to its
// agents, resources and lease generations (80 bytes a generation).
// --html draws the page of `lab run --html` from the file alone, and
// --trace sends its traces as `lab run --trace` sends a run's (package
// tracing reads only the history, so a real-time run's file traces too).
// An event that names no agent or resource where its kind names one, or
// one the header does not list, is a line that cannot be read. Exit
// status as for lab run: 0 nothing broke, 1 the fenced mode broke an
// invariant, a lock broke mutual exclusion (or the history records a
// library error), 2 the file cannot be read.
// A line that cannot be read is named as FILE:LINE; the events before it are
// still judged and reported, marked INTERRUPTED.
//
// # The history file
//
// A history is JSON Lines (package history reads and writes it). Line 1 is
// the header, with everything the checker needs:
//
//	{"kind":"run","format":2,"scenario":"gap","description":"...","seed":1,"backend":"sim",
//	 "modes":["naive","fenced"],"duration_ns":3000000000,"agents":["agent-1","agent-2"],
//	 "resources":["res-1"],"ttl_ns":1000000000,"clock_skew_ns":0,
//	 "clocks":{"drift_ppm_min":0,"drift_ppm_max":0,"coordinator_drift_ppm":0,"within_budget":true},
//	 "restarts":[{"at_ns":10000000000,"persist":false}]}
//
// within_budget says the skew budget covers the worst drift (then a
// containment breach is a violation); a restart without persist may reuse
// fences. Every other line is one event, in order within its mode (one mode
// after the other from lab run):
//
//	{"at_ns":1400000000,"mode":"fenced","kind":"commit_refused","agent":"agent-1",
//	 "resource":"res-1","fence":1,"other":"agent-2","other_fence":2}
//
// at_ns (true time since the run began, in ns), mode, kind, agent, resource
// (names from the header, "" for none) and fence (0 for none) are always
// there; incarnation (the coordinator incarnation that minted the lease
// generation, from 0), other, other_fence, request (acquire, renew,
// release), request_id, reason (the coordinator's), outcome (the history's
// own: no_reply, denied, check_failed, commit_refused, renew_refused, done,
// released, below_floor, counter_persisted, counter_lost, not_played), dur_ns,
// deadline_ns, intervention, fault, target and detail appear when set. A lease generation
// is (incarnation, resource, fence). Readers ignore fields they do not know;
// an unknown kind is an error. The kinds:
//
//	request_sent           an agent sent request (request_id; fence for renew/release); dur_ns: its network delay
//	request_dropped        the request was lost (or the agent was partitioned)
//	reply_dropped          the reply was lost
//	request_duplicated     the request is delivered twice; dur_ns: when the copy arrives
//	request_retried        an acquire resent under the same request_id
//	acquire_abandoned      the agent gave up its acquire: outcome no_reply, or denied (it will not try again)
//	granted                the coordinator minted a generation for agent; deadline_ns: its coordinator expiry
//	acquired               the agent completed the acquire; deadline_ns: the true instant it believes until
//	denied                 the coordinator refused an acquire: reason, other (holder), dur_ns (retry hint)
//	renewed                the agent completed a renewal; deadline_ns: its new belief
//	extended               the coordinator extended the generation; deadline_ns: its new expiry
//	renew_refused          the coordinator refused a renewal: reason
//	expired                the coordinator's lease expired unrenewed; deadline_ns: when
//	released               the coordinator released the generation
//	release_refused        the coordinator refused a release: reason
//	check_passed           the agent's validity check passed
//	check_failed           the agent's validity check failed
//	write_skipped          a scripted write was not attempted: no lease, or no passing check
//	stall_began            the agent stalls for dur_ns
//	stall_ended            the stall is over
//	commit_admitted        fenced: the gate admitted the write under fence and it landed
//	commit_refused         fenced: the gate refused it; other, other_fence: the floor (outcome refusal_not_logged: it could not log the refusal)
//	write_landed           naive: the write landed, with no gate
//	lease_abandoned        the agent stopped believing it holds the generation: outcome says why
//	admit_pushed           the coordinator's push of fence reached the gate; other, other_fence: the floor after
//	push_dropped           the push was lost
//	coordinator_restarted  a new incarnation resumes after fence; outcome counter_persisted or counter_lost
//	fault_began            the run played a fault: fault (its kind: partition, restart, crash, partition_member,
//	                       pause_member, pause_leader) on agent, or on target ("coordinator", "etcd member 2");
//	                       dur_ns: how long it is to last (0: an instant, no fault_ended follows); detail: how;
//	                       outcome not_played: it could not be played (detail: why)
//	fault_ended            the fault of that kind on that agent or target is over
//	intervened             a live intervention was applied: intervention
//	library_error          the library returned an error it never should: detail; the run ends
//	forgery_refused        a forger's write (no agent; outcome: own_key, tampered, alg_none or replayed; detail: the forger and the answer) was refused
//	forgery_landed         a forger's write landed at the resource under the fence it claimed (fenced: a violation)
//	write_failed           the store failed the agent's write (detail: the call and its error); whether it landed is the resource's record's to say
//
// # The JSON report
//
// `lab run --json` prints one object, history.Result as it marshals:
//
//	{
//	  "scenario": "gap",              // the scenario's name
//	  "seed": 1,
//	  "digest": "60cf1ca04a7e101a",   // 16 hex digits: equal digests, the same run event for event
//	  "virtual_duration_ms": 3000,    // the scenario's duration
//	  "events": 28,                   // events simulated, all modes
//	  "drift_within_budget": true,    // the skew budget covers the worst drift
//	  "verdict": "held",              // "held"; "broken" when there are violations (exit status 1);
//	                                  //   "vacuous" when the fenced mode made no write (exit status 1);
//	                                  //   "inconclusive" when a mode left a property unexercised (exit status 0)
//	  "backend": "sim",               // the runner: sim, memory or etcd (the history header's)
//	  "real": { ... },                // real backends only: where, resource, wall_ms, time_scale,
//	                                  //   faults {calls, requests_dropped, partitioned, duplicated, replies_dropped}
//	  "interrupted": true,            // only when the run was cut short: Ctrl-C, or --stop-at-first at
//	                                  //   a lock's counterexample (its mode's lock finding is broken)
//	  "interventions": [ ... ],       // only when live interventions were made: {at, kind, agent, duration, value, persist}
//	  "modes": {
//	    "fenced": { ... },            // present when the mode ran
//	    "naive":  { ... }
//	  }
//	}
//
// Each mode's object has "mode", "digest", "events" and these integer
// counters: acquisitions, renewals, denials, expiries, releases,
// fences_minted, retries, messages_lost, checks_failed, pushes_applied,
// commits_admitted, commits_refused, writes_failed (writes the store
// failed, a timeout or a lost connection, whose writers could not know
// whether they landed; only when not 0), faults_played (the faults the run
// played, fault_began events of any kind; only when not 0), faults_on_servers
// (the faults played, or not, on a server rather than an agent, each as its
// fault_began and fault_ended say it: {at_ms, fault, target, duration_ms,
// detail, not_played, ended_at_ms (-1: none), ended, failed_over}; only when
// there is one), stale_writes_landed (a write landed
// after a write of a newer lease generation, one minted later; fenced
// promises 0), reissued_writes_landed (a write of the resource's newest
// generation under a fence no higher than one landed before: a fence
// reissued by a restart that lost the counter; not stale), overlaps (two
// holders acting on one resource at one instant), silent_overlaps (the
// older write landed last, with no error), refused_overlaps,
// containment_breaches (a holder believed after the coordinator's expiry;
// fenced promises 0 while drift is within the skew budget), fence_reuses
// (only a restart that lost the counter), unexplained_refusals (always 0
// unless the gate is wrong), mutual_exclusion_violations (a grant while an
// earlier lease on the resource ran: a violation in any mode), takeovers
// (grants of a resource whose earlier lease was not released: what puts
// exclusion to the test), idle_while_waiting_ms (how long resources sat
// with no live lease while an acquirer the coordinator had refused for
// lock-delay waited: what a lock-delay costs; 0 without one),
// admitted_below_own_floor (a gate admitted a
// fence below one it had admitted; only when not 0; always 0 unless the
// gate is wrong), and, with forgers (--resource http),
// forgeries_refused, forgeries_landed and forged_floors_moved (a forged
// write landed above every fence before it; fenced promises 0 of both
// landed and moved). Then "per_resource" (a list of {resource,
// commits_admitted, commits_refused, stale_writes_landed,
// reissued_writes_landed, overlaps, silent_overlaps, floor_fence,
// floor_holder}), "counterexamples" (a list, the first 5 of each kind, of
// {kind, at_ms, resource, holder, fence, other, other_fence, detail}, kind
// one of stale-write, silent-overlap, refused-write, containment-breach,
// fence-reuse, unexplained-refusal), "more_counterexamples" ({<kind>: how
// many more of that kind the history showed}, only when some were left
// out; the text report says "and K more <kind>"), "not_exercised" (only
// when the run left a property of the mode untested: sentences naming
// mutual exclusion, the gate or containment; the mode's verdict is then
// "inconclusive", never "held"), renewals_after_end (renewals the lock
// answered OK though sent after their lease had ended: the lease
// contract broken; only when not 0; counterexample kind
// renewed-after-end), not_held_unmatched (a contender lock's answers to
// Renew or Release of a lease that had ended that were errors not
// matching ErrNotHeld: the lease contract broken; only when not 0;
// counterexample kind not-held-unmatched), "findings" (the verdict in three parts the checker
// makes: {lock, writes, coverage}, each {verdict, reason}, verdict one of
// "held", "broken", "inconclusive" or "n/a"; lock is mutual exclusion and
// the lease contract, the lock's own fault, inconclusive with no
// takeover; writes the stale writes under the mode's discipline, a naive
// one's stated as the expected finding with the remedy; coverage has
// "counts": {contended_grants, expiries_of_live_holders, renewals,
// renewals_after_expiry, releases, late_releases, takeovers,
// lost_replies_retried}, and lists what the run did not exercise; the
// mode's one-word "verdict" is derived from them) and, only when the
// fenced mode broke an invariant, a lock broke mutual exclusion or its
// lease contract, or the library returned an error it never should (in
// any mode), "violations" (a list of sentences). Fields are only ever
// added; a name is never changed or removed.
//
// `lab swarm --json` prints harness.SwarmResult: "scenario",
// "base_digest" (what the swarm ran but for the seeds), "first_seed",
// "last_seed", "shard" ({index, count}, only with --shard), "seeds" (run),
// "failures" (each {seed, scenario, violations, digest, reproduce}),
// "naive_stale_writes", "naive_seeds_with_stale_writes", "fenced_refusals",
// "events", "elapsed_ns", "first_counterexample" ({<mode>: {seed,
// seeds_run, wall_ns, digest, reproduce}, or null when no seed showed
// one}), plus "fixed", "drawn", "events_per_second", "seeds_per_second"
// and, when interrupted, "interrupted". --merge prints the same keys but
// "shard".
//
// `lab fixtures --json` prints {"verdict", "passed", "failed", "skipped",
// "fixtures"}: verdict is "broken" when a run of any fixture broke the
// fenced mode's invariants, else "held" (whether the expectations were
// met is passed and failed); each fixture is {name, file, verdict, passed,
// failures (sentences), reproduce (the lab run command of its first
// failing seed), error (why it did not load or finish)}.
//
// # Exit status
//
//	0    nothing broke (every seed; every fixture passed): the verdict is held, or
//	     inconclusive where the run left a property untested
//	1    the fenced mode broke an invariant, a lock broke mutual exclusion (in any
//	     mode), or the library returned an error it never should: a bug in the lock,
//	     reported loudly on standard error with the command that reproduces it; or a
//	     fixture failed
//	2    bad input: a flag, a scenario name, a file (nothing ran); a fixture file
//	     that does not load
//	130  interrupted by Ctrl-C
//
// Ctrl-C (SIGINT, or SIGTERM) stops the simulation: the command still
// flushes its traces, writes its HTML and prints the report of what ran,
// marked INTERRUPTED. A second Ctrl-C kills it at once.
package main
