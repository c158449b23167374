package sqlitestore_test

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/sqlitestore"
)

// The resource's record is the writes that landed, in the order SQLite
// applied them, each stamped with the run's time: an admitted commit and a
// naive write are in it, a commit the gate refused is not. The modes'
// resources of one name are apart.
func TestRecord(t *testing.T) {
	st, err := sqlitestore.NewSQLiteStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	var clock time.Duration
	now := func() time.Duration { clock += time.Millisecond; return clock }
	res, err := st.Resource(ctx, history.Fenced, "res-1", now)
	if err != nil {
		t.Fatal(err)
	}
	newer := leasefence.Token{Resource: "res-1", Holder: "agent-2", Fence: 2}
	older := leasefence.Token{Resource: "res-1", Holder: "agent-1", Fence: 1}
	if err := res.Commit(ctx, newer, 1); err != nil {
		t.Fatal(err)
	}
	fate, _, err := realtime.Land(ctx, res, history.DisciplineFenced, older, 2)
	if err != nil || fate.Landed || fate.Floor != (leasefence.Token{Holder: "agent-2", Fence: 2}) {
		t.Errorf("a stale commit: %+v, %v; want refused by agent-2's floor 2", fate, err)
	}
	if err := res.Write(ctx, older, 3); err != nil {
		t.Fatal(err)
	}
	got, err := res.Landings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []realtime.Landing{{ID: 1, At: time.Millisecond}, {ID: 3, At: 2 * time.Millisecond}}; !slices.Equal(got, want) {
		t.Errorf("landings %v, want %v", got, want)
	}
	naive, err := st.Resource(ctx, history.Naive, "res-1", now)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := naive.Landings(ctx); err != nil || len(l) != 0 {
		t.Errorf("the naive mode's res-1: %v, %v; want a record of its own, empty", l, err)
	}
}

// Close removes the store's directory; a store attached to it (another
// process's) reads the same record and leaves the directory to its owner.
func TestCloseAndAttach(t *testing.T) {
	st, err := sqlitestore.NewSQLiteStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	now := func() time.Duration { return 0 }
	res, err := st.Resource(ctx, history.Naive, "res-1", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Write(ctx, leasefence.Token{Holder: "agent-1"}, 7); err != nil {
		t.Fatal(err)
	}
	at := sqlitestore.AttachSQLite(st.Dir())
	other, err := at.Resource(ctx, history.Naive, "res-1", now)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := other.Landings(ctx); err != nil || len(l) != 1 || l[0].ID != 7 {
		t.Errorf("the attached store's record: %v, %v; want write 7", l, err)
	}
	if err := at.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st.Dir()); err != nil {
		t.Errorf("closing the attached store removed the directory: %v", err)
	}
	if err := errors.Join(st.Close(), st.Close()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store's directory is left behind: %v", err)
	}
	if _, err := st.Resource(ctx, history.Naive, "res-2", now); err == nil {
		t.Error("a closed store opened a resource")
	}
}
