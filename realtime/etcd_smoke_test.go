package realtime

import (
	"testing"

	"github.com/leasefence/lab/harness"
)

func TestEtcdSmoke(t *testing.T) {
	e, err := NewEtcd(t.Context(), EtcdOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	t.Logf("min ttl %v", e.MinTTL())
	sc, _ := harness.Builtin("overlap")
	sc.Duration = 15e9
	sc, k, err := MapOntoEtcd(sc, e.MinTTL(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scale %v", k)
	r, err := New(sc, Options{Backend: e, Store: EtcdStore{e}})
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
