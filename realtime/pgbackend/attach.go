package pgbackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

// What another process needs to take part in a run set up here: an agent
// run as a process of its own reaches the run's schema on the run's
// PostgreSQL (Share, and the attachers registered below), through
// connections named as the run's, so that a kill of the connections
// (kill_connections) cuts its sessions too.

// share is how another process reaches a postgres backend.
type share struct {
	URL    string `json:"url"`
	Schema string `json:"schema"`
}

// Share implements realtime.Sharer: the server's URL and the run's
// schema.
func (p *Postgres) Share() (string, error) {
	b, err := json.Marshal(share{URL: p.url, Schema: p.schema})
	return string(b), err
}

// Share implements realtime.Sharer: the gates are in the backend's
// PostgreSQL; the share says which gate (Settings.Gate).
func (s Store) Share() (string, error) {
	if s.Lease {
		return GateLease, nil
	}
	return GateFloor, nil
}

// attached is a backend another process set up, reached from this one:
// its Close closes this process's connections, and leaves the schema,
// which is the run's.
type attached struct{ *Postgres }

func (a attached) Close() error { return a.db.Close() }

// Attach reaches the run whose tables are in schema on the PostgreSQL at
// url (another backend's Share).
func Attach(url, schema string) (realtime.Backend, error) {
	if url == "" || schema == "" {
		return nil, errors.New("realtime: postgres: attaching needs the run's URL and schema")
	}
	db, err := Connect(url, schema)
	if err != nil {
		return nil, fmt.Errorf("realtime: postgres: %w", err)
	}
	return attached{&Postgres{url: url, schema: schema, db: db}}, nil
}

func init() {
	registry.SetOpener(registry.Backends, registry.Postgres, realtime.BackendAttacher(func(_ context.Context, sh string) (realtime.Backend, error) {
		var s share
		if err := json.Unmarshal([]byte(sh), &s); err != nil {
			return nil, fmt.Errorf("realtime: postgres: attaching: %w", err)
		}
		return Attach(s.URL, s.Schema)
	}))
	registry.SetOpener(registry.Stores, registry.Postgres, realtime.StoreAttacher(func(_ context.Context, sh string, b realtime.Backend) (realtime.Store, error) {
		a, ok := b.(attached)
		if !ok {
			return nil, fmt.Errorf("%w: the gates are in the run's PostgreSQL, and the process attached %T", realtime.ErrNotShared, b)
		}
		if sh != GateFloor && sh != GateLease {
			return nil, fmt.Errorf("realtime: postgres store: attaching: no gate %q", sh)
		}
		return Store{P: a.Postgres, Lease: sh == GateLease}, nil
	}))
}
