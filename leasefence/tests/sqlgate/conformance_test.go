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
// order row in the gate's transaction. Commits alternate between two gates
// on two handles of one database, as two processes would.
type sqlGate struct {
	gates [2]*sqlgate.Gate
	db    *sql.DB
	turn  chan int
}

func (s *sqlGate) next() *sqlgate.Gate {
	i := <-s.turn
	s.turn <- 1 - i
	return s.gates[i]
}

func (s *sqlGate) Commit(ctx context.Context, t leasefence.Token, value string) error {
	return s.next().Commit(ctx, t, insertOrder(t, value))
}

func (s *sqlGate) Admit(ctx context.Context, t leasefence.Token) error {
	return s.next().Admit(ctx, t)
}

func (s *sqlGate) Floor(ctx context.Context) (leasefence.Token, error) { return s.next().Floor(ctx) }

func (s *sqlGate) Rejections(ctx context.Context) ([]leasefence.Rejection, error) {
	return s.next().Rejections(ctx)
}

func (s *sqlGate) Written(ctx context.Context) ([]string, error) {
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

// TestConformance runs the gate conformance suite on each database. Every
// gate in it is two Gates on two *sql.DB handles, standing for two
// processes, taken in turn; so its Concurrent case has goroutines committing
// through both at once, and shows that they serialise through the database.
func TestConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, d database) {
		one, two := d.handle(t), d.handle(t)
		ordersTable(t, one, d.dialect())
		leasetest.TestGate(t, func(t *testing.T, resource string) leasetest.Gate {
			s := &sqlGate{gates: [2]*sqlgate.Gate{newGate(t, one, resource), newGate(t, two, resource)}, db: one, turn: make(chan int, 1)}
			s.turn <- 0
			return s
		})
	})
}
