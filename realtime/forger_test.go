package realtime_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/spec"
)

// plainStore is a store the registry does not know, whose resources take
// no proof: no realtime.ForgingStore.
type plainStore struct{ realtime.MemoryStore }

func (plainStore) Name() string { return "plain" }

// The forgers' proofs are the store's to make up: on a store that makes
// none, a scenario with forgers fails with an error naming the store, and
// the run keeps what it recorded.
func TestForgersNeedAForgingStore(t *testing.T) {
	sc := short(t, "overlap", 2*time.Second, 0.1)
	sc.Forgers = []spec.Forgery{spec.ForgeAlgNone}
	r, err := realtime.New(sc, realtime.Options{Store: plainStore{}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "store plain makes up no proofs") {
		t.Fatalf("Run: %v, want the store named as making up no proofs", err)
	}
	if res == nil || len(res.Modes) == 0 {
		t.Errorf("Run kept no result: %+v", res)
	}
}
