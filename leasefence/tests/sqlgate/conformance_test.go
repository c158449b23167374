package sqlgate_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
	"github.com/leasefence/lab/leasefence/sqlgate"
)

// sqlGate adapts a Gate to the conformance suite: a value is written as an
// order row in the gate's transaction. Calls alternate between two gates
// on two handles of one database, as two processes would.
type sqlGate struct {
	gates [2]*sqlgate.Gate
	db    *sql.DB
	turn  chan int
}

func (s *sqlGate) next() leasefence.Gate {
	i := <-s.turn
	s.turn <- 1 - i
	return s.gates[i]
}

func (s *sqlGate) harness() leasetest.GateHarness {
	return leasetest.GateHarness{Gate: alternating{s}, Commit: s.commit, Written: s.written}
}

func (s *sqlGate) commit(ctx context.Context, t leasefence.Token, value string) error {
	i := <-s.turn
	s.turn <- 1 - i
	return s.gates[i].Commit(ctx, t, insertOrder(t, value))
}

func (s *sqlGate) written(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT item FROM orders WHERE resource = $1 ORDER BY id`, s.gates[0].Resource())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// alternating is the pair as one leasefence.Gate, each call on the next.
type alternating struct{ s *sqlGate }

func (a alternating) Resource() string { return a.s.gates[0].Resource() }

func (a alternating) Admit(ctx context.Context, t leasefence.Token) error {
	return a.s.next().Admit(ctx, t)
}

func (a alternating) Floor(ctx context.Context) (leasefence.Token, error) {
	return a.s.next().Floor(ctx)
}

func (a alternating) RejectionsSince(ctx context.Context, seq uint64) ([]leasefence.Rejection, uint64, error) {
	return a.s.next().RejectionsSince(ctx, seq)
}

func (a alternating) RejectionCount(ctx context.Context) (uint64, error) {
	return a.s.next().RejectionCount(ctx)
}

// TestConformance runs the gate conformance suite on each database. Every
// gate in it is two Gates on two *sql.DB handles, standing for two
// processes, taken in turn; so its Concurrent case has goroutines committing
// through both at once, and shows that they serialise through the database.
func TestConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		one, two := d.handle(t), d.handle(t)
		ordersTable(t, one, d.dialect())
		leasetest.TestGate(t, func(t testing.TB, resource string) leasetest.GateHarness {
			s := &sqlGate{gates: [2]*sqlgate.Gate{newGate(t, one, resource), newGate(t, two, resource)}, db: one, turn: make(chan int, 1)}
			s.turn <- 0
			return s.harness()
		})
	})
}
