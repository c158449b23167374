package sqldialect

import (
	"errors"
	"fmt"
	"testing"
)

type pgError string

func (e pgError) Error() string    { return "pg " + string(e) }
func (e pgError) SQLState() string { return string(e) }

type liteError int

func (e liteError) Error() string { return fmt.Sprintf("sqlite %d", int(e)) }
func (e liteError) Code() int     { return int(e) }

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		d    Dialect
		err  error
		want bool
	}{
		{Postgres, fmt.Errorf("commit: %w", pgError("40001")), true},
		{Postgres, pgError("40P01"), true},
		{Postgres, pgError("23505"), false}, // unique_violation
		{Postgres, errors.New("database is locked"), false},
		{SQLite, fmt.Errorf("exec: %w", liteError(5)), true},
		{SQLite, liteError(5 | 2<<8), true}, // SQLITE_BUSY_SNAPSHOT
		{SQLite, liteError(6), true},
		{SQLite, liteError(19), false}, // SQLITE_CONSTRAINT
		{SQLite, errors.New("database is locked"), true},
		{SQLite, errors.New("no such table: x"), false},
	} {
		if got := tc.d.Transient(tc.err); got != tc.want {
			t.Errorf("%v.Transient(%v) = %v, want %v", tc.d, tc.err, got, tc.want)
		}
	}
}

func TestPlaceholdersAndNames(t *testing.T) {
	if got := SQLite.Placeholders("a = $1 AND b = $2"); got != "a = ?1 AND b = ?2" {
		t.Errorf("SQLite placeholders = %q", got)
	}
	if got := Postgres.Placeholders("a = $1"); got != "a = $1" {
		t.Errorf("Postgres placeholders = %q", got)
	}
	for d, want := range map[Dialect]string{SQLite: "SQLite", Postgres: "PostgreSQL", 0: "Dialect(0)"} {
		if d.String() != want || d.Valid() != (d != 0) {
			t.Errorf("Dialect(%d): %q, valid %v", int(d), d.String(), d.Valid())
		}
	}
}
