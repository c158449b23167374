package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// ErrNoMember is wrapped by a fault's error for a member index out of
// range, or a member that is not running.
var ErrNoMember = errors.New("etcdcluster: no such member running")

// cut implements links: traffic between a partitioned member and anyone
// else is cut, both ways. A peer connection whose first request did not
// name its sender is cut while any member is partitioned: it may be the
// partitioned member's (etcd's prober opens such connections, and its
// pipeline then reuses them for raft messages, which would carry the
// partitioned leader's appends through).
func (c *Cluster) cut(from, to int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if from == to {
		return false
	}
	if from == fromUnknown && len(c.partitioned) > 0 {
		return true
	}
	return c.partitioned[to] || (from >= 0 && c.partitioned[from])
}

// delay implements links: a delayed member's traffic, both ways.
func (c *Cluster) delay(from, to int) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.delayed[to], c.delayed[from])
}

// sender implements links.
func (c *Cluster) sender(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.ids[id]; ok {
		return i
	}
	return fromUnknown
}

func (c *Cluster) member(i int) (*member, error) {
	if i < 0 || i >= len(c.members) {
		return nil, fmt.Errorf("%w: member %d of %d", ErrNoMember, i, len(c.members))
	}
	return c.members[i], nil
}

// Partition cuts member i off from the other members and from the
// clients until Heal(i): its connections are closed, and new ones refused.
func (c *Cluster) Partition(i int) error {
	if _, err := c.member(i); err != nil {
		return err
	}
	c.mu.Lock()
	c.partitioned[i] = true
	c.mu.Unlock()
	for _, m := range c.members {
		m.peer.cutNow()
		m.client.cutNow()
	}
	return nil
}

// Heal ends member i's partition.
func (c *Cluster) Heal(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.partitioned, i)
}

// Delay holds back every byte to and from member i by d (0 ends it).
func (c *Cluster) Delay(i int, d time.Duration) error {
	if _, err := c.member(i); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d <= 0 {
		delete(c.delayed, i)
	} else {
		c.delayed[i] = d
	}
	return nil
}

// Pause stops member i's process (SIGSTOP) until Resume(i).
func (c *Cluster) Pause(i int) error {
	return c.signal(i, stopProcess, true)
}

// Resume continues member i's process (SIGCONT).
func (c *Cluster) Resume(i int) error {
	return c.signal(i, continueProcess, false)
}

func (c *Cluster) signal(i int, sig func(*os.Process) error, paused bool) error {
	m, err := c.member(i)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return fmt.Errorf("%w: member %d is down", ErrNoMember, i)
	}
	if err := sig(m.cmd.Process); err != nil {
		return fmt.Errorf("etcdcluster: member %d: %w", i, err)
	}
	m.paused = paused
	return nil
}

// Leader asks the members, past the proxies, which of them leads, and
// returns its index. A paused or partitioned member is not asked: the
// answer is the others'.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	cli, err := c.directClient()
	if err != nil {
		return -1, err
	}
	defer cli.Close()
	for i, m := range c.members {
		m.mu.Lock()
		ep, skip := "http://"+m.direct, m.direct == "" || m.paused
		m.mu.Unlock()
		c.mu.Lock()
		skip = skip || c.partitioned[i] // it may not know yet that it lost its lead
		c.mu.Unlock()
		if skip {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err != nil || st.Leader == 0 {
			continue
		}
		c.mu.Lock()
		l, ok := c.ids[fmt.Sprintf("%x", st.Leader)]
		c.mu.Unlock()
		if ok {
			return l, nil
		}
	}
	return -1, errors.New("etcdcluster: no member knows a leader")
}
