package sqlgate

import (
	"database/sql"
	"fmt"

	"github.com/leasefence/lab/leasefence/internal/sqldialect"
)

// Dialect is the SQL dialect of the database a Gate is on.
type Dialect int

// The dialects a Gate speaks.
const (
	SQLite   = Dialect(sqldialect.SQLite)
	Postgres = Dialect(sqldialect.Postgres)
)

func (d Dialect) String() string { return d.sql().String() }

func (d Dialect) sql() sqldialect.Dialect { return sqldialect.Dialect(d) }

func (d Dialect) valid() bool { return d.sql().Valid() }

// inferDialect names the dialect of db's driver from the package path of the
// driver's type (see the package doc).
func inferDialect(db *sql.DB) (Dialect, error) {
	d, driver := sqldialect.Infer(db)
	if d == 0 {
		return 0, fmt.Errorf("%w: driver %s; name it with WithDialect", ErrUnknownDialect, driver)
	}
	return Dialect(d), nil
}

// nowMicros is the SQL expression for the database's clock in microseconds
// since the Unix epoch.
func (d Dialect) nowMicros() string { return d.sql().NowMicros() }

// placeholders rewrites the $n parameters of q for d.
func (d Dialect) placeholders(q string) string { return d.sql().Placeholders(q) }

// transient reports whether err is a busy or serialisation failure, which
// rolling the attempt back and running it again can cure.
func (d Dialect) transient(err error) bool { return d.sql().Transient(err) }
