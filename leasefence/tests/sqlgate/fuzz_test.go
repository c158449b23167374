package sqlgate_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
)

// FuzzCommitAgainstMemory drives the SQL gate (on SQLite) and the in-memory
// FenceGate, the model, with the same sequence of commits, failing writes
// and admits, and requires the same answers, floors, logs and rows. The one
// documented difference is a write that fails: the database rolls the floor
// back with it, the in-memory gate keeps it raised, so the model is asked
// only whether it would admit such a write, and is committed to only when
// it refuses it (and logs the refusal).
//
// Each operation is three bytes: what (commit, failing commit, admit),
// which holder of three, and a fence from 0 to 7 (0 is never issued and
// must be refused by both).
func FuzzCommitAgainstMemory(f *testing.F) {
	f.Add([]byte{0, 0, 3, 0, 1, 3, 0, 2, 2, 1, 0, 5, 0, 0, 4})
	f.Add([]byte{2, 1, 4, 0, 0, 3, 0, 1, 4, 1, 1, 6, 0, 2, 6, 2, 2, 6})
	f.Add([]byte{1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 1, 0, 2, 0, 0, 0, 2, 7, 1, 1, 7})
	f.Add([]byte{0, 0, 5, 0, 0, 5, 0, 1, 5, 2, 1, 5, 2, 2, 6, 0, 1, 5})

	d := openSQLite(f)
	db := d.handle(f)
	ordersTable(f, db, d.dialect())
	var run atomic.Int64
	errFail := errors.New("the write failed")

	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 3*64 {
			ops = ops[:3*64]
		}
		ctx := context.Background()
		r := "fuzz-" + strconv.FormatInt(run.Add(1), 10) // a fresh floor and log in the shared tables
		g, err := sqlgate.New(ctx, db, r)
		if err != nil {
			t.Fatal(err)
		}
		model := leasefence.NewFenceGate(r)
		var wantRows []order
		for i := 0; i+2 < len(ops); i += 3 {
			kind := ops[i] % 3
			tk := tok(r, "h"+strconv.Itoa(int(ops[i+1]%3)), leasefence.Fence(ops[i+2]%8))
			item := strconv.Itoa(i / 3)
			var got, want error
			switch kind {
			case 0:
				got = g.Commit(ctx, tk, insertOrder(tk, item))
				want = model.Commit(ctx, tk, func(context.Context) error { return nil })
				if want == nil {
					wantRows = append(wantRows, order{Holder: tk.Holder, Fence: tk.Fence, Item: item})
				}
			case 1:
				failing := func(ctx context.Context, tx *sql.Tx) error {
					if err := insertOrder(tk, item)(ctx, tx); err != nil {
						return err
					}
					return errFail
				}
				got = g.Commit(ctx, tk, failing)
				if tk.Fence != 0 && model.WouldAdmit(tk) {
					want = errFail // and the database undoes the floor: the model is left alone
				} else {
					want = model.Commit(ctx, tk, func(context.Context) error { return errFail })
				}
			case 2:
				got = g.Admit(ctx, tk)
				want = model.Admit(tk)
			}
			if !sameAnswer(got, want) {
				t.Fatalf("op %d (%d on %v): sql gate = %v, model = %v", i/3, kind, tk, got, want)
			}
			var gotR, wantR *leasefence.StaleFenceError
			if errors.As(got, &gotR) && errors.As(want, &wantR) && gotR.Rejection != wantR.Rejection {
				t.Fatalf("op %d (%d on %v): sql gate refused with %+v, model with %+v", i/3, kind, tk, gotR.Rejection, wantR.Rejection)
			}
		}
		if got, want := mustFloor(t, g), model.Floor(); got != want {
			t.Errorf("floor = %+v, model's = %+v", got, want)
		}
		if got, want := mustRejections(t, g), model.Rejections(); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Errorf("log =\n\t%+v\nmodel's\n\t%+v", got, want)
		}
		if got := readOrders(t, db, r); !slices.Equal(got, wantRows) {
			t.Errorf("rows = %+v, want %+v", got, wantRows)
		}
	})
}

// sameAnswer reports whether two gates answered alike: both admitted, or
// both failed with the same kind of error.
func sameAnswer(got, want error) bool {
	for _, kind := range []error{leasefence.ErrStaleFence, leasefence.ErrTokenConflict, leasefence.ErrInvalidRequest, leasefence.ErrWrongResource} {
		if errors.Is(want, kind) {
			return errors.Is(got, kind)
		}
	}
	return errors.Is(got, want) // nil or the write's own error
}
