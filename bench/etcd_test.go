package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
	"github.com/leasefence/lab/leasefence/etcdlease/etcdtest"
)

// etcdTTL is long enough that no lease of a run expires during it: what is
// measured is the calls, not etcd's revocations. A lease etcdlease's release
// leaves to expire costs one Raft entry later, outside the call.
const etcdTTL = 60 * time.Second

// latencies records one duration per cycle and reports the p50 and p99 in
// milliseconds, and the Raft entries committed per cycle.
type latencies struct {
	member *etcdembed.Member
	d      []time.Duration
	index  uint64
}

func startLatencies(m *etcdembed.Member) *latencies {
	return &latencies{member: m, index: m.CommittedIndex()}
}

func (l *latencies) time(f func()) {
	start := time.Now()
	f()
	l.d = append(l.d, time.Since(start))
}

func (l *latencies) report(b *testing.B, unit string) {
	raft := l.member.CommittedIndex() - l.index
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(l.d[len(l.d)/2]), "p50-ms")
	b.ReportMetric(ms(l.d[len(l.d)*99/100]), "p99-ms")
	b.ReportMetric(float64(raft)/float64(len(l.d)), "raft-entries/"+unit)
}

// BenchmarkEtcdAcquireRelease is one holder acquiring and releasing a free
// resource on an embedded single member, against etcd's own
// concurrency.Mutex in the same run:
//
//   - impl=mutex: Lock and Unlock on one long-lived session (its lease is
//     shared by every lock, which is why it is not fenced per grant);
//   - impl=mutex-session: a session per lock (a lease per grant, as
//     etcdlease has), Lock, Unlock, and closing the session;
//   - impl=etcdlease: BeginAcquire, Acquire, CompleteAcquire, Release.
//
// Run it with -benchtime 1000x for the p50 and p99 over 1,000 cycles.
func BenchmarkEtcdAcquireRelease(b *testing.B) {
	member, cli := etcdtest.NewMember(b)
	ctx := b.Context()

	b.Run("impl=mutex", func(b *testing.B) {
		session, err := concurrency.NewSession(cli, concurrency.WithTTL(int(etcdTTL/time.Second)))
		if err != nil {
			b.Fatal(err)
		}
		defer session.Close()
		m := concurrency.NewMutex(session, "/bench/mutex")
		lat := startLatencies(member)
		for b.Loop() {
			lat.time(func() {
				if err := m.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := m.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			})
		}
		lat.report(b, "cycle")
	})

	b.Run("impl=mutex-session", func(b *testing.B) {
		lat := startLatencies(member)
		for b.Loop() {
			lat.time(func() {
				session, err := concurrency.NewSession(cli, concurrency.WithTTL(int(etcdTTL/time.Second)))
				if err != nil {
					b.Fatal(err)
				}
				m := concurrency.NewMutex(session, "/bench/mutex-session")
				if err := m.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := m.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := session.Close(); err != nil {
					b.Fatal(err)
				}
			})
		}
		lat.report(b, "cycle")
	})

	b.Run("impl=etcdlease", func(b *testing.B) {
		coord, client := benchCoordinator(b, cli)
		lat := startLatencies(member)
		var acquireEntries uint64
		for b.Loop() {
			lat.time(func() {
				before := member.CommittedIndex()
				req, err := client.BeginAcquire("r")
				if err != nil {
					b.Fatal(err)
				}
				out, err := coord.Acquire(ctx, req)
				if err != nil || !out.OK {
					b.Fatalf("Acquire = %+v, %v", out, err)
				}
				acquireEntries += member.CommittedIndex() - before
				if _, err := client.CompleteAcquire(req, out.Grant); err != nil {
					b.Fatal(err)
				}
				if r, err := coord.Release(ctx, out.Grant.Token); err != nil || !r.OK {
					b.Fatalf("Release = %+v, %v", r, err)
				}
			})
		}
		lat.report(b, "cycle")
		b.ReportMetric(float64(acquireEntries)/float64(len(lat.d)), "raft-entries/acquire")
	})
}

// BenchmarkEtcdRenew is one renewal of a live lease against its floors:
//
//   - impl=keepalive: etcd's KeepAliveOnce alone (the baseline);
//   - impl=read: a linearizable read of one key alone, the other half of a
//     renewal: together with the keep-alive, the least a renewal that
//     answers truthfully can send;
//   - impl=etcdlease: the coordinator's Renew of a grant it made (the
//     keep-alive and a read of the holder key, sent together);
//   - impl=etcdlease-elsewhere: Renew by a coordinator that did not make the
//     grant and does not remember it (a read for its etcd lease, the
//     keep-alive, a read again), forgotten again before each renewal.
func BenchmarkEtcdRenew(b *testing.B) {
	member, cli := etcdtest.NewMember(b)
	ctx := b.Context()

	b.Run("impl=keepalive", func(b *testing.B) {
		g, err := cli.Grant(ctx, int64(etcdTTL/time.Second))
		if err != nil {
			b.Fatal(err)
		}
		lat := startLatencies(member)
		for b.Loop() {
			lat.time(func() {
				if _, err := cli.KeepAliveOnce(ctx, g.ID); err != nil {
					b.Fatal(err)
				}
			})
		}
		lat.report(b, "renewal")
	})

	b.Run("impl=read", func(b *testing.B) {
		if _, err := cli.Put(ctx, "/bench/read", "v"); err != nil {
			b.Fatal(err)
		}
		lat := startLatencies(member)
		for b.Loop() {
			lat.time(func() {
				if _, err := cli.Get(ctx, "/bench/read"); err != nil {
					b.Fatal(err)
				}
			})
		}
		lat.report(b, "renewal")
	})

	for _, elsewhere := range []bool{false, true} {
		name := "impl=etcdlease"
		if elsewhere {
			name += "-elsewhere"
		}
		b.Run(name, func(b *testing.B) {
			coord, client := benchCoordinator(b, cli)
			req, _ := client.BeginAcquire("renewed")
			out, err := coord.Acquire(ctx, req)
			if err != nil || !out.OK {
				b.Fatalf("Acquire = %+v, %v", out, err)
			}
			lease, err := client.CompleteAcquire(req, out.Grant)
			if err != nil {
				b.Fatal(err)
			}
			renewer := coord
			lat := startLatencies(member)
			for b.Loop() {
				if elsewhere { // outside lat.time, which is what p50-ms reads
					if renewer != coord {
						_ = renewer.Close()
					}
					renewer, _ = benchCoordinator(b, cli)
				}
				lat.time(func() {
					req, err := client.BeginRenewal(lease)
					if err != nil {
						b.Fatal(err)
					}
					out, err := renewer.Renew(ctx, req)
					if err != nil || !out.OK {
						b.Fatalf("Renew = %+v, %v", out, err)
					}
					if lease, err = client.CompleteRenewal(req, out.Grant); err != nil {
						b.Fatal(err)
					}
				})
			}
			lat.report(b, "renewal")
			_ = renewer.Close()
			_, _ = coord.Release(context.WithoutCancel(ctx), lease.Token)
		})
	}
}

func benchCoordinator(b *testing.B, cli *clientv3.Client) (*etcdlease.Coordinator, *leasefence.Client) {
	b.Helper()
	coord, err := etcdlease.New(cli, etcdlease.Options{Prefix: "/bench/" + b.Name() + "/", TTL: etcdTTL})
	if err != nil {
		b.Fatal(err)
	}
	client, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock("agent"), Holder: "agent"})
	if err != nil {
		b.Fatal(err)
	}
	return coord, client
}
