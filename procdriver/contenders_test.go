package procdriver_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence/redislease/redisdeploy"
	"github.com/leasefence/lab/procdriver"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/redisbackend"
	// Every adapter registers its opener, and the attacher an agent's
	// process reaches what it opened with.
	_ "github.com/leasefence/lab/realtime/adapters"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// pausedHolder is the published finding as a script: agent-1 takes the
// lock, checks it at 1800ms and its process is stopped (SIGSTOP) for 5s,
// renewals and timers and all; the lock's server lets its 2s lease go,
// agent-2 takes the lock (at 3s, or at 4s if the server was slow to let
// go; an acquire still unanswered at 4s is waited for, not sent again) and writes at 4500ms, within its lease either way; agent-1 wakes at
// 6800ms and writes on the strength of its check. Every instant is at
// least 500ms from the TTL's boundaries, so a loaded machine moves none
// across one.
func pausedHolder() spec.Scenario {
	sc := spec.Scenario{Name: "paused-holder", Agents: 2, Resources: 1, TTL: 2 * time.Second, Seed: 1, Duration: 8 * time.Second}
	sc.Agent.WritesPerLease = 1
	sc.Script = []spec.Action{
		{At: 0, Agent: "agent-1", Do: spec.ActAcquire},
		{At: 1800 * time.Millisecond, Agent: "agent-1", Do: spec.ActCheck},
		{At: 1800 * time.Millisecond, Agent: "agent-1", Do: spec.ActStall, Duration: 5 * time.Second},
		{At: 6800 * time.Millisecond, Agent: "agent-1", Do: spec.ActWrite},
		{At: 3000 * time.Millisecond, Agent: "agent-2", Do: spec.ActAcquire},
		{At: 4000 * time.Millisecond, Agent: "agent-2", Do: spec.ActAcquire},
		{At: 4500 * time.Millisecond, Agent: "agent-2", Do: spec.ActCheck},
		{At: 4500 * time.Millisecond, Agent: "agent-2", Do: spec.ActWrite},
	}
	return sc
}

// skipWithoutRedis skips a test whose setup found no redis-server.
func skipWithoutRedis(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, redisdeploy.ErrNotInstalled) {
		t.Skip(err)
	}
}

// The libraries' own code in each agent's process, paused by SIGSTOP past
// its TTL: redsync, redislock and redlock (the Redis backend beside them,
// for fenced), etcd's Mutex naive and fenced (on etcd). Every library lock
// without a fence lands the paused holder's stale write; the fenced
// contenders' gates refuse it. The history header says what each is.
func TestLibraryContendersAsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs redis-servers, an etcd and a process per agent and contender for 6s")
	}
	for _, tc := range []struct {
		backend string
		modes   []history.Mode
	}{
		{registry.Redis, []history.Mode{registry.Redsync, registry.Redislock, registry.Redlock, history.Fenced}},
		{registry.Etcd, []history.Mode{registry.EtcdMutex, registry.EtcdMutexFenced}},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			dir := t.TempDir()
			var h history.Header
			events := map[history.Mode][]history.Event{}
			keep := history.SubscriberFunc(func(e history.Event) { events[e.Mode] = append(events[e.Mode], e) })
			res := runContenders(t, realtime.Config{Backend: tc.backend, TempDir: dir}, pausedHolder(), tc.modes, &h, keep)
			for _, m := range tc.modes {
				failedBefore := t.Failed() // each mode's events are shown once, for the mode that failed first
				rep := res.Modes[m]
				c := h.Contender(m)
				mx, xs := history.MutualExclusion(&h, events[m])
				t.Logf("%s (%s %s, generations %s): %d acquisitions, %d landed, %d stale writes, %d refused, %d mutual-exclusion violations; processes %+v",
					m, c.Library, c.Version, c.Generations, rep.Acquisitions, rep.CommitsAdmitted, rep.StaleWritesLanded, rep.CommitsRefused, mx, res.Processes[m])
				if mx != 0 {
					t.Errorf("%s: the lock granted a held key: %+v", m, xs)
				}
				if res.Processes[m].Paused != 1 {
					t.Errorf("%s: %d processes paused, want agent-1's", m, res.Processes[m].Paused)
				}
				if m != history.Fenced && (c.Library == "" || c.Generations == "") {
					t.Errorf("%s: the header says %+v", m, c)
				}
				switch c.Discipline {
				case history.DisciplineNaive:
					if rep.StaleWritesLanded != 1 {
						t.Errorf("%s: %d stale writes landed, want the paused holder's", m, rep.StaleWritesLanded)
					}
				default:
					if rep.StaleWritesLanded != 0 || rep.CommitsRefused != 1 {
						t.Errorf("%s: %d stale writes landed, %d refused: want the paused holder's refused", m, rep.StaleWritesLanded, rep.CommitsRefused)
					}
				}
				if t.Failed() && !failedBefore {
					for _, e := range events[m] {
						t.Logf("  %v %s agent %d fence %d %s", e.At, e.Kind, e.Agent, e.Fence, e.Detail)
					}
				}
			}
			if v := res.Violations(); len(v) != 0 {
				t.Errorf("violations: %v", v)
			}
			if left := children(t, os.Getpid()); len(left) > 0 {
				t.Errorf("processes left: %v", left)
			}
			if left, _ := os.ReadDir(dir); len(left) > 0 {
				t.Errorf("left behind in %s: %v", dir, left)
			}
		})
	}
}

// runContenders runs sc with c's backend and store and modes' contenders,
// its agents as processes, and closes everything after; *h is the run's
// header.
func runContenders(t *testing.T, c realtime.Config, sc spec.Scenario, modes []history.Mode, h *history.Header, subs ...history.Subscriber) *procdriver.Result {
	t.Helper()
	s, err := realtime.Open(t.Context(), c, sc)
	skipWithoutRedis(t, err)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	err = s.OpenContenders(t.Context(), modes)
	skipWithoutRedis(t, err)
	if err != nil {
		t.Fatal(err)
	}
	res, header := runWithHeader(t, s, procdriver.Options{Modes: modes, Subscribers: subs})
	*h = header
	return res
}

// On a Redis the run did not start, a run of agents as processes leaves
// not one key behind: the lab's own leases, the gates and the records are
// removed with the backend, and the library contenders' keys live on
// servers of their own, which stop with the run.
func TestNoKeyLeftOnGivenRedis(t *testing.T) {
	t.Parallel()
	url := os.Getenv("LEASEFENCE_REDIS_URL")
	if url == "" {
		t.Skip("LEASEFENCE_REDIS_URL is not set (scripts/redis.sh start)")
	}
	sc := pausedHolder()
	s, err := realtime.Open(t.Context(), realtime.Config{Backend: registry.Redis, TempDir: t.TempDir(), Settings: redisbackend.Settings{URL: url}.Entry()}, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	share, err := realtime.Share(registry.Redis, s.Backend)
	if err != nil {
		t.Fatal(err)
	}
	prefix := share[strings.Index(share, `"prefix":"`)+len(`"prefix":"`):]
	prefix = prefix[:strings.IndexByte(prefix, '"')]
	modes := []history.Mode{history.Naive, history.Fenced, registry.Redsync}
	if err := s.OpenContenders(t.Context(), modes); err != nil {
		t.Fatal(err)
	}
	r, err := procdriver.New(s, procdriver.Options{Modes: modes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	o, _ := redis.ParseURL(url)
	cli := redis.NewClient(o)
	defer cli.Close()
	keys, err := cli.Keys(t.Context(), "*"+prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		t.Errorf("keys of the run left on %s: %v", url, keys)
	}
}

// What agents as processes cannot share, the registry refuses before
// anything starts, naming it and what to use instead; a mode whose lock
// the caller did not give is refused by New.
func TestRefusedSetups(t *testing.T) {
	t.Parallel()
	sc := pausedHolder()
	for _, tc := range []struct {
		c     realtime.Config
		modes []history.Mode
		want  string
	}{
		{realtime.Config{Backend: registry.Memory}, nil, "backend memory cannot be shared by agents as processes: it lives in one process; use --backend etcd, redis or postgres"},
		{realtime.Config{Backend: registry.Redis, Resource: registry.Memory}, []history.Mode{registry.Redsync}, "resource memory cannot be shared"},
		{realtime.Config{Backend: registry.Etcd, Resource: registry.HTTP}, nil, "resource http cannot be shared"},
		{realtime.Config{Backend: registry.Redis}, []history.Mode{"zookeeper-lock"}, `contender zookeeper-lock: must be naive, fenced,`},
	} {
		err := procdriver.Check(tc.c, sc, tc.modes...)
		if !errors.Is(err, procdriver.ErrCannotPlay) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v %v: %v, want ErrCannotPlay and %q", tc.c, tc.modes, err, tc.want)
		}
	}
	drift := sc
	drift.Clocks.CoordinatorDriftPPM = 100
	if err := procdriver.Check(realtime.Config{Backend: registry.Redis}, drift); !errors.Is(err, procdriver.ErrCannotPlay) || !strings.Contains(err.Error(), "coordinator_drift_ppm") {
		t.Errorf("coordinator drift: %v", err)
	}
	s := setup(t, registry.SQLite, sc)
	if _, err := procdriver.New(s, procdriver.Options{Modes: []history.Mode{registry.Redsync}}); !errors.Is(err, procdriver.ErrNoContender) {
		t.Errorf("a library contender not given: %v, want ErrNoContender", err)
	}
	// A contender that says not how another process reaches it.
	lone := &realtime.Contender{Info: history.Contender{Name: registry.Redsync}}
	if _, err := procdriver.New(s, procdriver.Options{Modes: []history.Mode{registry.Redsync}, Contenders: map[history.Mode]*realtime.Contender{registry.Redsync: lone}}); !errors.Is(err, procdriver.ErrCannotPlay) || !errors.Is(err, realtime.ErrNotShared) {
		t.Errorf("a contender with no share: %v, want ErrCannotPlay and ErrNotShared", err)
	}
}
