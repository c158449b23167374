package harness

import "github.com/leasefence/lab/history"

// Mode is how agents write to the resource: history.Fenced or
// history.Naive.
type Mode = history.Mode

// The two modes. A run can do both on the same fault schedule.
const (
	Fenced = history.Fenced
	Naive  = history.Naive
)

// Report is what the checker found in one mode's history, and Result a
// whole run: the simulator's own report is the checker's verdict on the
// history it emitted.
type (
	Report = history.Report
	Result = history.Result
)
