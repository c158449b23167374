// Package harness is the deterministic simulator of leasefence: agents that
// take leases on shared resources through the real leasefence Coordinator,
// Clients and FenceGates, driven by one virtual clock, through faults
// (stalls, lost and duplicated messages, drift, partitions, coordinator
// restarts), in two modes on the same faults: naive and fenced.
//
// The agents are package agent's state machines: the simulator holds no
// agent rule, it carries out their outputs on virtual time and the
// simulated network and feeds them back their timers, replies and writes
// (agent.go). The engine (sim.go, agent.go, queue.go) is a discrete-event
// simulation with no wall clock and no I/O: the same Scenario and seed give
// the same run, event for event. It emits every state change as a history.Event and
// obtains its Report by running history's checker on that history, so its
// verdict is exactly what `lab check` finds in the history file; it never
// hands the checker its own records. The checker folds the events on a
// goroutine beside the engine's, in batches, in their order (fold.go): a
// spare core takes the fold's tenth of the work, and a run reads the same
// digest and report an inline fold gives. A library error does not crash it: the
// run ends with a library_error event, which the checker reports as a
// violation.
//
// It runs a spec.Scenario (the scenario model, shared with package
// realtime). Around the engine: runs (run.go: Run, SelfCheck; swarm.go:
// many seeds on all cores), and a paced Live run for the dashboard
// (live.go), whose snapshots are the live view's fold of the run's events
// (package liveview).
package harness
