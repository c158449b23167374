package sqllease_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
)

// statementHook sees each statement before pgx runs it, and returns the
// statement to run, or an error to answer instead, and what to do once it
// has run (nil: nothing).
type statementHook func(q string) (run string, after func(), err error)

// hooked opens a handle on d whose connections pass every statement
// through hook: a coordinator with a statement changed, or failing.
func (d *postgresDB) hooked(t testing.TB, hook statementHook) *sql.DB {
	t.Helper()
	db := sql.OpenDB(hookedConnector{stdlib.GetConnector(*d.Config.Copy()), hook})
	t.Cleanup(func() { db.Close() })
	return db
}

type hookedConnector struct {
	driver.Connector
	hook statementHook
}

func (h hookedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := h.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return hookedConn{c, h.hook}, nil
}

// hookedConn passes everything to pgx's connection, statements through
// the hook.
type hookedConn struct {
	driver.Conn
	hook statementHook
}

func (c hookedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c hookedConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	q, after, err := c.hook(q)
	if err != nil {
		return nil, err
	}
	res, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
	if after != nil {
		after()
	}
	return res, err
}

func (c hookedConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	q, after, err := c.hook(q)
	if err != nil {
		return nil, err
	}
	rows, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
	if after != nil {
		after()
	}
	return rows, err
}
