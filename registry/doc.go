// Package registry is the one table of what can run where: the lab's
// backends (where the leases live), stores (where the gates live), agent
// drivers (how the agents run) and contenders (whose lock is under test),
// each with its name, what it needs, and which features of a scenario it
// can play (Entry.CanPlay).
//
// The table sits below the runners, so that a scenario file's validation
// reads it without importing a runner. What opens an entry belongs to the
// package that implements it: an adapter registers its opener under its
// entry's name from its own package (SetOpener), as database/sql drivers
// register themselves, and the runner that opens it asks for it by name
// (Opener). Names are spelled here and nowhere else: flags, their help and
// errors, fixture keys, listings and the runners' "can I play this?"
// checks all read the table.
package registry
