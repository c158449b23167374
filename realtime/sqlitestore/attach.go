package sqlitestore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

// What another process needs to take part in a run set up here: an agent
// run as a process of its own reaches the run's SQLite files (Share, and
// the attacher registered below).

// AttachSQLite opens the SQLite store whose files are in dir (another
// store's Dir). Its Close closes its databases and leaves dir.
func AttachSQLite(dir string) *SQLiteStore {
	return &SQLiteStore{dir: dir, dbs: make(map[history.Mode]*sql.DB), attached: true}
}

// Share implements realtime.Sharer: the directory of its files.
func (s *SQLiteStore) Share() (string, error) { return s.dir, nil }

func init() {
	registry.SetOpener(registry.Stores, registry.SQLite, realtime.StoreAttacher(func(_ context.Context, dir string, _ realtime.Backend) (realtime.Store, error) {
		if dir == "" {
			return nil, errors.New("realtime: sqlite store: attaching needs the run's directory")
		}
		return AttachSQLite(dir), nil
	}))
}
