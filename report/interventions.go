package report

import (
	"fmt"
	"io"

	"github.com/leasefence/lab/history"
)

// writeInterventions lists the live interventions made during the run,
// one a line, so a report of a steered run says what was steered.
func writeInterventions(w io.Writer, ivs []history.Intervention) {
	if len(ivs) == 0 {
		return
	}
	fmt.Fprintf(w, "%s made while it ran:\n", history.Plural(len(ivs), "intervention", "interventions"))
	for _, iv := range ivs {
		fmt.Fprintf(w, "  %10s  %s\n", history.FormatDuration(iv.At), describeIntervention(iv))
	}
}

// describeIntervention says in words what one intervention did.
func describeIntervention(iv history.Intervention) string {
	switch iv.Kind {
	case history.StallAgent:
		return fmt.Sprintf("stalled %s for %s", iv.Agent, history.FormatDuration(iv.Duration))
	case history.SetDropRate:
		return fmt.Sprintf("set the drop rate to %.2f", iv.Value)
	case history.RestartCoordinator:
		if iv.Persist {
			return "restarted the coordinator, keeping its fence counter"
		}
		return "restarted the coordinator, losing its fence counter"
	case history.TogglePush:
		return "toggled the gate push"
	}
	return string(iv.Kind)
}
