// Package liveview is the one fold of a run's events into what the
// dashboard draws: a Snapshot per mode, with the holders, gates, agents,
// recent refusals and lanes of recent history. Both runners feed it their
// events (the simulator's paced Live run and the real-time runner's), and
// the dashboard (package tui) reads its snapshots; it reads nothing but the
// events, so what the dashboard shows is what the history says.
package liveview
