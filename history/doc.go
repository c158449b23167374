// Package history is what a run leaves behind and how it is judged: the
// typed events every runner emits, the history file that holds them, the
// one Reader that folds them into lease generations, beliefs and writes,
// and the Checker that judges a history from nothing else.
//
// A runner (the deterministic simulator, or agents against a real
// coordinator) emits Events; Check(header, events) judges them, in the
// spirit of porcupine's CheckEvents(model, history): it reads the writes as
// each resource recorded them, the true times, and what each agent believed
// and did, and never asks the runner, a gate or a coordinator whether
// anything was safe. The simulator obtains its own report the same way, so
// a history file checked later gives exactly the report of the run.
//
// # The history file
//
// A history is JSON Lines. Line 1 is the header:
//
//	{"kind":"run","format":2,"scenario":"gap","seed":1,"backend":"sim",
//	 "modes":["naive","fenced"],"duration_ns":3000000000,
//	 "agents":["agent-1","agent-2"],"resources":["res-1"],
//	 "ttl_ns":1000000000,"clock_skew_ns":0,
//	 "clocks":{"drift_ppm_min":0,"drift_ppm_max":0,"coordinator_drift_ppm":0,"within_budget":true},
//	 "restarts":[{"at_ns":10000000000,"persist":false}]}
//
// Every other line is one event, in the order it happened within its mode
// (at_ns never decreases within a mode; the modes' events may be
// interleaved or one after the other):
//
//	{"at_ns":1400000000,"mode":"fenced","kind":"commit_refused","agent":"agent-1",
//	 "resource":"res-1","fence":1,"other":"agent-2","other_fence":2}
//
// Always present: at_ns (true time since the run began, in nanoseconds),
// mode ("fenced" or "naive"), kind, agent and resource (names from the
// header, "" where none applies) and fence (0 where none applies). Present
// when not zero: incarnation (the coordinator incarnation, from 0, of the
// lease generation the event concerns), other and other_fence (a second
// party), request ("acquire", "renew" or "release"), request_id, reason
// (the coordinator's: "held", "expired", ...), outcome (the history's own:
// no_reply, denied, check_failed, commit_refused, write_failed, renew_refused,
// done, released, refusal_not_logged, below_floor, counter_persisted,
// counter_lost, not_played), dur_ns, deadline_ns,
// intervention, fault, target and detail. A lease generation is named by (incarnation, resource,
// fence). Readers ignore fields they do not know, so the format can grow;
// an unknown kind is an error, and so is an event that names no agent or no
// resource where its kind names one (every kind names an agent but
// coordinator_restarted, fault_began, fault_ended, intervened, library_error
// and the forgery kinds, which name a resource; every kind that names an
// agent names a resource too, but the fault kinds, check_passed,
// check_failed, stall_began, stall_ended and write_skipped), or one the
// header does not list. A fault event names its kind, and an agent or a
// target. The header line may be at most MaxHeaderLine bytes (32 MiB) and
// an event line MaxEventLine (1 MiB): a longer line is refused where its
// bound falls, and its rest is never read, so reading a history takes
// memory for its header and one event, never for a line of any length.
//
// The checker judges a landed write by lease generation, not by fence
// number: a write is stale when a write of a newer generation of its
// resource (one minted after the writer's, in the history's order) had
// landed before it. After a restart that lost the fence counter, the new
// holder of a reissued, lower fence writes under the resource's newest
// generation: not stale, but counted apart as landing under a reissued
// fence.
//
// The checker believes no claim one event makes that the others do not
// bear out. A refusal names a floor: it is explained only by a floor above
// the refused fence (or equal to it under another holder: a token
// conflict) that an admitted commit or an applied push had raised at that
// resource before. A fence minted no higher than one before it is excused
// only by a coordinator_restarted event that lost the counter between the
// two mints (the header's planned restarts excuse nothing). Every landing
// must be under a generation the history granted its writer on that
// resource. A write whose request_id was reported refused must not land.
// A commit admitted below a fence the push had brought the gate is a
// violation, and so is a release the coordinator granted of a lease it had
// already let go. A mode that made no write at all is vacuous: nothing in it
// was put to the test.
//
// The kinds:
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
//	commit_admitted        fenced: the gate admitted the write under fence and it landed (request_id: the write's id, where the runner has one)
//	commit_refused         fenced: the gate refused it; other, other_fence: the floor (outcome refusal_not_logged: it could not log the refusal)
//	write_landed           naive: the write landed, with no gate
//	lease_abandoned        the agent stopped believing it holds the generation: outcome says why
//	admit_pushed           the coordinator's push of fence reached the gate; other, other_fence: the floor after (outcome below_floor if it was already higher); dur_ns: how long after at_ns it was known applied
//	push_dropped           the push was lost
//	coordinator_restarted  a new incarnation resumes after fence; outcome counter_persisted or counter_lost
//	fault_began            the run played a fault: fault (its kind: partition, restart, crash, partition_member,
//	                       pause_member, pause_leader, pause_primary, kill_primary, partition_primary,
//	                       kill_connections) on agent, or on target ("coordinator", "etcd member 2",
//	                       "redis primary redis-0", "postgres connections of RUN"); dur_ns: how
//	                       long it is to last (0: an instant, no fault_ended follows); detail: how;
//	                       outcome not_played: it could not be played (detail: why)
//	fault_ended            the fault of that kind on that agent or target is over; detail: what it did (which
//	                       replica was promoted); outcome failed_over: the store failed over to a replica
//	intervened             a live intervention was applied: intervention
//	library_error          the library returned an error it never should: detail; the run ends
//	forgery_refused        a forger's write (no agent; outcome: own_key, tampered, alg_none or replayed; detail: the forger and the answer) was refused
//	forgery_landed         a forger's write landed at the resource under the fence it claimed (fenced: a violation)
//	write_failed           the store failed the agent's write (detail: the call and its error); whether it landed is the resource's record's to say
//
// A file that cannot be read gives a *LineError naming the file and line
// (wrapping ErrBadHistory); the header and the events before the bad line
// are kept.
package history
