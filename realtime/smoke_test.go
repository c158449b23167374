package realtime

import (
	"testing"

	"github.com/leasefence/lab/harness"
)

func TestSmoke(t *testing.T) {
	sc, _ := harness.Builtin("overlap")
	sc = Scale(sc, 0.1)
	r, err := New(sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for m, rep := range res.Modes {
		t.Logf("%s: acq %d ren %d exp %d adm %d ref %d stale %d overlaps %d viol %v events %d", m, rep.Acquisitions, rep.Renewals, rep.Expiries, rep.CommitsAdmitted, rep.CommitsRefused, rep.StaleWritesLanded, rep.Overlaps, rep.Violations, rep.Events)
	}
	t.Logf("wall %v faults %+v", res.Wall, res.Faults)
}
