// Package redisbackend is the real-time runner's adapter for Redis: the
// backend redis (Redis: redislease's Coordinator in fenced mode, the
// classic SET NX PX lock in naive mode, on a throwaway redis-server of
// redisdeploy's or a given URL) and the store redis (RedisStore: a
// redislease Gate per resource, its record a stream each write appends to
// in the gate's MULTI/EXEC). It registers both with the registry when
// linked (realtime/adapters links it).
//
// The backend and its store share one package because a restart of the
// server is theirs together: every call waits it out (quiesced), and a
// restart that loses the data first saves what the gates must keep
// (beforeLoss).
package redisbackend
