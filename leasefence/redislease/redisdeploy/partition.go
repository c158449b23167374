package redisdeploy

import (
	"context"
	"fmt"
)

// The deployment's own traffic (replication, and the Sentinels' links to
// the data servers) authenticates as one ACL user, clusterUser; clients
// authenticate as another, AppUser; Redis's default user is off, so that
// neither falls back to it. Partition turns that user off on one server: its
// replicas and the Sentinels lose it, while clients keep reaching it. This
// is the partition an application meets when the network splits between
// the Redis hosts but not between it and the primary, played without
// privileges on loopback, where no firewall rule can tell the deployment's
// connections from a client's.
//
// The alternatives Redis offers do not cut the same thing: CLIENT KILL
// TYPE replica is undone by the replica's next reconnect; CLIENT PAUSE and
// DEBUG SLEEP stop clients too; REPLICAOF NO ONE on a replica promotes it
// behind the Sentinels' back. An ACL user that is off refuses every AUTH,
// so a replica's link stays down (its master_link_status is down) and a
// Sentinel's PING is answered -NOAUTH, which a Sentinel does not count as
// an answer: past down-after it finds the server down, as it would one it
// cannot reach.
const (
	clusterUser = "leasefence-cluster"
	clusterPass = "leasefence-cluster-secret" // loopback only, and the deployment's own
)

// The user and password of a deployment's clients (FailoverOptions and
// Server.Client give them): every command, every key. They guard nothing
// (every server listens on loopback only); they tell a client's
// connection from the deployment's own.
const (
	AppUser     = "leasefence-app"
	AppPassword = "leasefence-app-secret"
)

// clusterUserConf is the data servers' part of it: the users, and the
// credentials a replica gives its primary.
var clusterUserConf = fmt.Sprintf("user default off\nuser %s on >%s ~* &* +@all\nuser %s on >%s ~* &* +@all\nmasteruser %s\nmasterauth %s\n",
	clusterUser, clusterPass, AppUser, AppPassword, clusterUser, clusterPass)

// Partition cuts s off from the other data servers and the Sentinels,
// while clients still reach it: s refuses their authentication and drops
// their connections. A primary partitioned so keeps applying clients'
// writes that no replica receives; past the Sentinels' down-after time
// they promote a replica, and the two servers are primaries at once until
// Heal. A partitioned replica stops receiving the primary's writes.
func (d *Deployment) Partition(ctx context.Context, s *Server) error {
	cli := s.client()
	defer cli.Close()
	if err := cli.Do(ctx, "ACL", "SETUSER", clusterUser, "off").Err(); err != nil {
		return fmt.Errorf("redisdeploy: partition %s: %w", s.Name, err)
	}
	// Its own link to a primary, if it is a replica: it gives a password
	// the primary refuses, and its link is dropped.
	if err := cli.ConfigSet(ctx, "masterauth", clusterPass+"-cut").Err(); err != nil {
		return fmt.Errorf("redisdeploy: partition %s: %w", s.Name, err)
	}
	// Every connection made as the user (replicas, Sentinels), and its
	// link to a primary.
	for _, kill := range [][]any{{"CLIENT", "KILL", "USER", clusterUser}, {"CLIENT", "KILL", "TYPE", "master"}} {
		if err := cli.Do(ctx, kill...).Err(); err != nil && !isNoSuchClient(err) {
			return fmt.Errorf("redisdeploy: partition %s: %w", s.Name, err)
		}
	}
	s.setPartitioned(true)
	return nil
}

// Heal undoes Partition: the deployment reaches s again. The Sentinels,
// finding an old primary that is no longer theirs, turn it into a replica
// of the one they promoted, which discards what it applied meanwhile.
func (d *Deployment) Heal(ctx context.Context, s *Server) error {
	cli := s.client()
	defer cli.Close()
	if err := cli.Do(ctx, "ACL", "SETUSER", clusterUser, "on").Err(); err != nil {
		return fmt.Errorf("redisdeploy: heal %s: %w", s.Name, err)
	}
	if err := cli.ConfigSet(ctx, "masterauth", clusterPass).Err(); err != nil {
		return fmt.Errorf("redisdeploy: heal %s: %w", s.Name, err)
	}
	s.setPartitioned(false)
	return nil
}

// isNoSuchClient: CLIENT KILL with a filter answers an integer, but older
// servers answer an error when nothing matched.
func isNoSuchClient(err error) bool { return err != nil && err.Error() == "ERR No such client" }

// Demote makes s a replica of primary (REPLICAOF), as the Sentinels do on
// their own some seconds after they find an old primary back (they wait
// for it to report its role a few times); s resyncs from primary, which
// discards what s applied alone. It returns once s reports its link to
// primary up, or ctx ends.
func (d *Deployment) Demote(ctx context.Context, s, primary *Server) error {
	cli := s.client()
	defer cli.Close()
	if err := cli.Do(ctx, "REPLICAOF", "127.0.0.1", primary.Port).Err(); err != nil {
		return fmt.Errorf("redisdeploy: demote %s: %w", s.Name, err)
	}
	want := fmt.Sprint(primary.Port)
	if err := poll(ctx, func(ctx context.Context) (bool, error) {
		info, err := s.info(ctx, "replication")
		return info["role"] == "slave" && info["master_port"] == want && info["master_link_status"] == "up", err
	}); err != nil {
		return fmt.Errorf("redisdeploy: demote %s: it did not sync with %s: %w%s", s.Name, primary.Name, err, s.logTail())
	}
	return nil
}
