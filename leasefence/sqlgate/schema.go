package sqlgate

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// column is one column the gate needs, with the class of type it must have.
type column struct {
	name    string
	integer bool // BIGINT; otherwise TEXT
}

// table is one of the gate's tables: its columns and the rest of its
// definition. Both dialects take the same DDL.
type table struct {
	columns []column
	keys    string
}

var (
	floorTable = table{
		columns: []column{{"resource", false}, {"holder", false}, {"fence", true}, {"refused", true}},
		keys:    "PRIMARY KEY (resource)",
	}
	logTable = table{
		columns: []column{
			{"resource", false}, {"seq", true}, {"holder", false}, {"fence", true},
			{"floor_holder", false}, {"floor_fence", true}, {"at_us", true},
		},
		keys: "PRIMARY KEY (resource, seq)",
	}
)

func (t table) create(name string) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + name + " (")
	for _, c := range t.columns {
		typ := "TEXT"
		if c.integer {
			typ = "BIGINT"
		}
		b.WriteString(c.name + " " + typ + " NOT NULL, ")
	}
	b.WriteString(t.keys + ")")
	return b.String()
}

func (t table) names() []string {
	names := make([]string, len(t.columns))
	for i, c := range t.columns {
		names[i] = c.name
	}
	return names
}

// ensureTables makes sure both tables exist with the gate's columns,
// creating those that are absent. A table it can read is never created
// again, so a role without the right to create tables can use tables made
// ahead.
func (g *Gate) ensureTables(ctx context.Context) error {
	for _, tab := range []struct {
		name string
		def  table
	}{{g.floorTab, floorTable}, {g.logTab, logTable}} {
		if err := g.ensureTable(ctx, tab.name, tab.def); err != nil {
			return err
		}
	}
	return nil
}

func (g *Gate) ensureTable(ctx context.Context, name string, def table) error {
	readErr, shapeErr := g.checkShape(ctx, name, def)
	if shapeErr != nil {
		return shapeErr
	}
	if readErr == nil {
		return nil
	}
	var createErr error
	err := g.retry(ctx, "creating table "+name, func() error {
		_, err := g.db.ExecContext(ctx, def.create(name))
		return err
	})
	if err != nil {
		createErr = err
	}
	// Read again whether or not the create succeeded: another process may
	// have created the table at the same moment (PostgreSQL can then fail
	// one of two concurrent CREATE TABLE IF NOT EXISTS).
	readAgain, shapeErr := g.checkShape(ctx, name, def)
	switch {
	case shapeErr != nil:
		return shapeErr
	case readAgain == nil:
		return nil
	case createErr != nil:
		return fmt.Errorf("%w: table %s cannot be read (%v) and cannot be created: %w; "+
			"a read-only database, or a role that may not create tables, needs the tables made ahead "+
			"with the statements in the sqlgate package doc",
			ErrSchema, name, readErr, createErr)
	}
	return fmt.Errorf("%w: table %s was created but cannot be read: %w", ErrSchema, name, readAgain)
}

// checkShape reads name's columns. readErr is why it could not be read (it
// is absent, or not ours to read); shapeErr is a table that was read but has
// other columns than def: a collision with another table of that name.
func (g *Gate) checkShape(ctx context.Context, name string, def table) (readErr, shapeErr error) {
	rows, err := g.db.QueryContext(ctx, "SELECT * FROM "+name+" WHERE 1 = 0")
	if err != nil {
		return err, nil
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return err, nil
	}
	collision := func(why string) error {
		got := make([]string, len(types))
		for i, t := range types {
			got[i] = t.Name() + " " + t.DatabaseTypeName()
		}
		return fmt.Errorf("%w: table %s exists and is not a gate table: %s (it has %s; a gate's has %s); "+
			"choose another prefix with WithTablePrefix",
			ErrSchema, name, why, strings.Join(got, ", "), strings.Join(def.names(), ", "))
	}
	if len(types) != len(def.columns) {
		return nil, collision(fmt.Sprintf("%d columns, not %d", len(types), len(def.columns)))
	}
	for _, t := range types {
		i := slices.IndexFunc(def.columns, func(c column) bool { return strings.EqualFold(c.name, t.Name()) })
		if i < 0 {
			return nil, collision("column " + t.Name() + " is not a gate column")
		}
		if !typeFits(t.DatabaseTypeName(), def.columns[i].integer) {
			return nil, collision(fmt.Sprintf("column %s is %s", t.Name(), t.DatabaseTypeName()))
		}
	}
	return nil, nil
}

// typeFits reports whether a column declared as typ can hold an integer, or
// text. An unknown type (some drivers report none) is given the benefit of
// the doubt.
func typeFits(typ string, integer bool) bool {
	typ = strings.ToUpper(typ)
	if typ == "" {
		return true
	}
	if integer {
		return strings.Contains(typ, "INT")
	}
	return strings.Contains(typ, "TEXT") || strings.Contains(typ, "CHAR")
}
