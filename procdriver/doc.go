// Package procdriver runs a real-time scenario with every agent an OS
// process of its own, so that a stall is what it is in production: a pause
// of the whole process, renewals and all.
//
// Each agent, in each mode, is the lab's own binary re-executed as a
// hidden subcommand (ChildArg; a program that can become a child calls
// RunIfChild first thing). The child runs the agent package's state
// machine, as the in-process runner does, with real timers on goroutines
// of their own, and calls its mode's lock: the lab's coordinator on the
// run's backend (etcd or Redis), reached through the real client; or, for
// a library's contender (redsync, redislock, redlock, etcd's Mutex), the
// library's own code, opened anew in the child on the servers the
// contender's opener started in the parent, so that a SIGSTOP freezes the
// library's renewals and timers as a GC pause would. It writes through a
// gate the processes share (the run's SQLite files, the etcd or the Redis
// gates). It decides nothing the agent does.
//
// What a child may reach is what every process of the run can: the
// registry's Shared backends, stores and contenders (registry.Entry.Shares
// refuses the rest, such as the in-memory coordinator and gates, by
// name). The parent tells each child how to reach them (realtime.Share),
// and the child attaches with the attacher each adapter registers beside
// its opener (realtime.AttachBackend, AttachStore, AttachContender). A
// contender whose generations are the order in which the lab saw its
// grants has them numbered by the parent, across the processes, in the
// order the grants reach it: each child sees only its own.
//
// The parent (Runner) plays the scenario's faults on the processes:
//
//   - A stall between the check and the write is SIGSTOP ... SIGCONT of
//     the child's process group. The child's StallBegan event is what
//     tells the parent; the child then waits for the parent's word before
//     it goes on, so the pause lands in the check-to-write gap, and lasts
//     the stall's length. While it is stopped nothing of it runs: not its
//     renewals, not its clock checks.
//   - A crash (spec.Crash) is SIGKILL of the child, and a new process for that
//     agent after a delay.
//   - Clock drift and offset are the child's: its agent's clock is the
//     runner's (realtime.NewAgentClock) inside the child.
//   - The faults of the backend's servers (the scenario's faults list: an
//     etcd member paused or cut off) are played on the backend, each at
//     its instant, as the in-process runner plays them
//     (realtime.PlayFaults), and recorded in every mode.
//
// A child opens what its agent needs, then writes its header; once every
// child has, the parent sends them the run's start, and the run's time
// begins.
//
// The children write their events to the parent on a pipe in the history's
// own line format (history.Encoder), and announce each write before they
// make it; the history's landings are built from the resources' own record
// of them (realtime.Resource.Landings), and what the coordinator did from
// what the children saw of it (merge.go). One history per mode, judged by
// history's checker.
//
// # Nothing left behind
//
// Every child runs in a process group of its own (so a terminal's Ctrl-C
// reaches the parent only, which ends them) and, on Linux, dies with the
// parent (Pdeathsig). A child also ends when its stdin, the parent's end of
// the pipe, closes. Run kills every group it started before it returns, on
// success, on failure and when its context ends. A library contender's
// servers die with the parent too (an embedded etcd is in its process;
// redisdeploy's servers have Pdeathsig), and their directories are marked
// as the parent's (internal/scratch), so that a parent killed outright
// leaves none that the next run does not remove.
package procdriver
