package sqlgate

import (
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Dialect is the SQL dialect of the database a Gate is on.
type Dialect int

// The dialects a Gate speaks.
const (
	SQLite Dialect = iota + 1
	Postgres
)

func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "SQLite"
	case Postgres:
		return "PostgreSQL"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

func (d Dialect) valid() bool { return d == SQLite || d == Postgres }

// inferDialect names the dialect of db's driver from the package path of the
// driver's type: the one thing every driver has that says what it talks to.
func inferDialect(db *sql.DB) (Dialect, error) {
	typ := reflect.TypeOf(db.Driver())
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	path := strings.ToLower(typ.PkgPath())
	switch {
	case strings.Contains(path, "sqlite"):
		return SQLite, nil
	case strings.Contains(path, "pgx"), strings.Contains(path, "lib/pq"), strings.Contains(path, "postgres"):
		return Postgres, nil
	}
	return 0, fmt.Errorf("%w: driver %s.%s; name it with WithDialect", ErrUnknownDialect, typ.PkgPath(), typ.Name())
}

// nowMicros is the SQL expression for the database's clock in microseconds
// since the Unix epoch. PostgreSQL's clock_timestamp, unlike now(), moves
// within a transaction.
func (d Dialect) nowMicros() string {
	if d == Postgres {
		return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)"
	}
	return "CAST(unixepoch('subsec') * 1000000 AS INTEGER)"
}

// placeholders rewrites the $n parameters of q for d. SQLite reads $1 as a
// parameter named "$1", bound by order of appearance, so it gets ?1, which
// it binds by number.
func (d Dialect) placeholders(q string) string {
	if d == SQLite {
		return strings.ReplaceAll(q, "$", "?")
	}
	return q
}

// transient reports whether err is a failure that rolling the attempt back
// and running it again can cure: the database was busy, or it aborted the
// transaction to serialise it with another.
func (d Dialect) transient(err error) bool {
	if d == Postgres {
		var pg interface{ SQLState() string }
		if errors.As(err, &pg) {
			switch pg.SQLState() {
			case "40001", "40P01": // serialization_failure, deadlock_detected
				return true
			}
		}
		return false
	}
	var lite interface{ Code() int }
	if errors.As(err, &lite) {
		switch lite.Code() & 0xff { // the primary result code, without the extended bits
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true
		}
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "database is locked") || strings.Contains(msg, "database table is locked")
}
