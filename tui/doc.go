// Package tui is a live terminal dashboard for a leasefence lab run (a
// Source: the simulator paced by a *harness.Live, or a real-time run): it
// shows who holds each lease and how long each side believes it has,
// every gate's floor, the log of refused writes, naive against fenced on
// the same faults, and a timeline of every agent's recent states, so a
// person watching sees two holders overlap and the gate refuse the stale
// one.
//
// The dashboard never slows or changes the simulation. The Live paces
// itself on its own goroutine (Run starts it); the dashboard takes a
// snapshot of every mode on a tick (Options.Tick, 10 to 30 frames a
// second), never one message per simulation event, and a slow terminal
// only drops frames. Every control that changes the run (a stall, the
// drop rate, a coordinator restart, the gate push) goes through
// Live.Intervene, so it is recorded and the steered run replays. A
// real-time run cannot pause (Source.RealTime says why): space, or the
// first refusal, freezes the picture while the run goes on, and once the
// picture is live again a row under the timeline's lanes marks with = the
// interval the run went on unwatched.
//
// Nothing here needs a terminal to be constructed or tested: New builds a
// Model from a Live and Options, and View draws whatever size the last
// tea.WindowSizeMsg gave. Choosing between this dashboard and a plain
// report when stdout is not a terminal is the caller's job.
//
// No state is told by colour alone: every state has a word in the tables
// and a glyph in the timeline (. idle, ? waiting, # holding, ~ stalled,
// ! thinks it holds: a lease the coordinator let go; writes are + admitted, x refused, S stale landed), so
// the dashboard reads the same in a terminal without colour.
package tui
