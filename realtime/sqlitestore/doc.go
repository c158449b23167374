// Package sqlitestore is the real-time runner's store sqlite: each mode's
// resources in a SQLite file of its own (modernc.org/sqlite, pure Go),
// each behind a sqlgate.Gate, its record a writes table whose rows are
// inserted in the gate's transaction. It registers itself with the
// registry when linked (realtime/adapters links it). AttachSQLite lets
// another process (an agent run as an OS process) reach a run's files.
package sqlitestore
