// Package sqldialect is what sqlgate and sqllease both need to know of the
// SQL databases they run on: which one a database/sql driver talks to, the
// database's clock, parameters, and which failures a retry can cure. Each
// of them keeps its own exported Dialect type, with the same values, and
// converts.
package sqldialect

import (
	"database/sql"
	"errors"
	"reflect"
	"strconv"
	"strings"
)

// Dialect is a database's SQL dialect.
type Dialect int

// The dialects; the packages' exported constants have the same values.
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

// Valid reports whether d is SQLite or Postgres.
func (d Dialect) Valid() bool { return d == SQLite || d == Postgres }

// Infer names the dialect of db's driver from the package path of the
// driver's type, the one thing every driver has that says what it talks
// to: a path containing "sqlite" is SQLite (modernc.org/sqlite,
// github.com/mattn/go-sqlite3, ...); one containing "pgx", "lib/pq" or
// "postgres" is PostgreSQL. Otherwise it returns 0 and the driver's type,
// for the caller's error.
func Infer(db *sql.DB) (Dialect, string) {
	typ := reflect.TypeOf(db.Driver())
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	path := strings.ToLower(typ.PkgPath())
	switch {
	case strings.Contains(path, "sqlite"):
		return SQLite, ""
	case strings.Contains(path, "pgx"), strings.Contains(path, "lib/pq"), strings.Contains(path, "postgres"):
		return Postgres, ""
	}
	return 0, typ.PkgPath() + "." + typ.Name()
}

// NowMicros is the SQL expression for the database's clock in
// microseconds since the Unix epoch: PostgreSQL's clock_timestamp(), which
// unlike now() moves within a transaction; on SQLite the host's wall
// clock, to the millisecond, read by the process that runs the statement.
func (d Dialect) NowMicros() string {
	if d == Postgres {
		return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)"
	}
	return "CAST(unixepoch('subsec') * 1000000 AS INTEGER)"
}

// Placeholders rewrites the $n parameters of q for d. SQLite reads $1 as a
// parameter named "$1", bound by order of appearance, so it gets ?1, which
// it binds by number.
func (d Dialect) Placeholders(q string) string {
	if d == SQLite {
		return strings.ReplaceAll(q, "$", "?")
	}
	return q
}

// Transient reports whether err is a failure that rolling the attempt back
// and running it again can cure: the database was busy, or it aborted the
// transaction to serialise it with another. It reads the driver error's
// SQLState() string (pgx, lib/pq) or Code() int (modernc.org/sqlite), or,
// for SQLite drivers with neither, the message.
func (d Dialect) Transient(err error) bool {
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
