package spec

import "errors"

// ErrNeedsPostgres refuses a scenario that kills the PostgreSQL
// connections where no PostgreSQL backend runs.
var ErrNeedsPostgres = errors.New("kills of the PostgreSQL connections (faults: kill_connections) need the real-time PostgreSQL backend (--backend postgres)")

// FaultKillConnections, on the faults list, terminates every session of
// the run's coordinators and gates on PostgreSQL at At, whatever each was
// doing, and every session they open again until Duration has passed: for
// that long, each call that reaches the server may be cut.
const FaultKillConnections Fault = "kill_connections"

// connectionsKind is what the faults list holds of a kill of the
// PostgreSQL connections.
var connectionsKind = timedKind{
	aim: func(TimedFault) string { return "postgres connections" },
	validate: func(s *Scenario, i int, bad complaint) {
		if f := s.Faults[i]; f.Member != 0 || f.Delay != 0 {
			bad(faultField(i), "a kill of the PostgreSQL connections names no member and delays nothing")
		}
	},
}
