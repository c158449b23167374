package redislease_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/redislease"
	"github.com/leasefence/lab/leasefence/redislease/redisdeploy"
)

// The cost of each safety option beside the default, on one deployment (a
// primary, two replicas, three Sentinels on loopback) through a failover
// client, in one run:
//
//	cd leasefence/redislease
//	go test -run '^$' -bench 'Options' -benchtime 2000x -count 6 | tee new.txt
//	benchstat -col /option new.txt

// benchDeployment is started by the first benchmark that needs it and
// closed by TestMain.
var benchDeployment struct {
	once sync.Once
	d    *redisdeploy.Deployment
	app  *redis.Client
	err  error
}

func needDeployment(b *testing.B) *redis.Client {
	b.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		b.Skip("redis-server is not installed: scripts/redis-sentinel.sh start installs it")
	}
	benchDeployment.once.Do(func() {
		dir, err := os.MkdirTemp("", "leasefence-bench-")
		if err != nil {
			benchDeployment.err = err
			return
		}
		d, err := redisdeploy.Start(context.Background(), redisdeploy.Options{Dir: dir})
		if err != nil {
			os.RemoveAll(dir)
			benchDeployment.err = err
			return
		}
		benchDeployment.d, benchDeployment.app = d, redis.NewFailoverClient(d.FailoverOptions())
		closeDeployment = func() {
			benchDeployment.app.Close()
			d.Close()
			os.RemoveAll(dir)
		}
	})
	if benchDeployment.err != nil {
		b.Fatal(benchDeployment.err)
	}
	return benchDeployment.app
}

// closeDeployment ends the benchmarks' deployment, if one was started.
var closeDeployment = func() {}

// options are the settings measured, each beside "default".
var options = []struct {
	name string
	repl redislease.Replication
	wm   bool
}{
	{"default", redislease.Replication{}, false},
	{"watermark", redislease.Replication{}, true},
	{"wait1", redislease.Replication{Replicas: 1, Timeout: time.Second}, false},
	{"wait2", redislease.Replication{Replicas: 2, Timeout: time.Second}, false},
	{"wait2+watermark", redislease.Replication{Replicas: 2, Timeout: time.Second}, true},
}

func watermarkIf(on bool) *redislease.Watermark {
	if on {
		return redislease.NewWatermark()
	}
	return nil
}

func BenchmarkOptions(b *testing.B) {
	c := needDeployment(b)
	ctx := context.Background()
	for _, o := range options {
		b.Run("op=acquire-release/option="+o.name, func(b *testing.B) {
			coord, err := redislease.New(c, redislease.Options{Prefix: newPrefix(b), TTL: 10 * time.Second, ReplayWindow: time.Minute, Replication: o.repl, Watermark: watermarkIf(o.wm)})
			if err != nil {
				b.Fatal(err)
			}
			measure(b, func(i int) error {
				out, err := coord.Acquire(ctx, leasefence.AcquireRequest{RequestID: "req-" + strconv.Itoa(i), Holder: "agent-a", Resource: "r"})
				if err != nil || !out.OK {
					return errorf("Acquire = %+v, %v", out, err)
				}
				if rel, err := coord.Release(ctx, out.Grant.Token); err != nil || !rel.OK {
					return errorf("Release = %+v, %v", rel, err)
				}
				return nil
			})
		})
		b.Run("op=commit-new-fence/option="+o.name, func(b *testing.B) {
			prefix := newPrefix(b)
			g, err := redislease.NewGate(c, "r", redislease.GateOptions{Prefix: prefix, Replication: o.repl, Watermark: watermarkIf(o.wm)})
			if err != nil {
				b.Fatal(err)
			}
			key := "{" + prefix + "}app:value"
			measure(b, func(i int) error {
				t := leasefence.Token{Resource: "r", Holder: "agent-" + strconv.Itoa(i), Fence: leasefence.Fence(i + 1)}
				return g.Commit(ctx, t, func(ctx context.Context, p redis.Pipeliner) error {
					p.Set(ctx, key, "v", 0)
					return nil
				})
			})
		})
	}
}
