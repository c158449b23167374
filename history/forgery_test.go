package history

import (
	"path/filepath"
	"strings"
	"testing"
)

// Forged writes are counted in both modes, from the events alone; in the
// fenced mode one that landed is a violation, and so is the floor it
// moved (the second forgery at the same fence moves nothing).
func TestCheckerCountsForgeries(t *testing.T) {
	for _, tc := range []struct {
		file      string
		violation string
	}{
		{"forgeries_fenced", "2 forged writes landed through the gate; 1 floor moved by a forger"},
		{"forgeries_naive", ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			h, events, err := ReadFile(filepath.Join("testdata", tc.file+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			r := Check(h, events).Modes[h.Modes[0]]
			if r.ForgeriesRefused != 1 || r.ForgeriesLanded != 2 || r.ForgedFloorsMoved != 1 {
				t.Errorf("forgeries refused %d, landed %d, floors moved %d; want 1, 2, 1", r.ForgeriesRefused, r.ForgeriesLanded, r.ForgedFloorsMoved)
			}
			if got := strings.Join(r.Violations, "; "); got != tc.violation {
				t.Errorf("violations %q, want %q", got, tc.violation)
			}
			if r.CommitsAdmitted != 1 || r.StaleWritesLanded != 0 {
				t.Errorf("honest writes: %d landed, %d stale; want 1, 0", r.CommitsAdmitted, r.StaleWritesLanded)
			}
		})
	}
}
