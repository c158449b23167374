package procdriver_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/etcdlease"
	"github.com/leasefence/lab/realtime/etcdbackend"
	"github.com/leasefence/lab/realtime/sqlitestore"
	"github.com/leasefence/lab/registry"
)

// holderEnv makes the test binary a user's program (asHolder): the value
// is "endpoint prefix sqlite-dir".
const holderEnv = "PROCDRIVER_TEST_HOLDER"

// holdOn is how a user's program holds a lease: leasefence.Hold on etcd,
// renewing in the background; renewed, if not nil, runs after each
// renewal etcd granted.
func holdOn(ctx context.Context, endpoints []string, prefix, holder string, renewed func()) (*leasefence.Session, *etcdbackend.Etcd, error) {
	e, err := etcdbackend.AttachEtcd(endpoints, prefix)
	if err != nil {
		return nil, nil, err
	}
	coord, err := etcdlease.New(e.Client(), etcdlease.Options{Prefix: prefix + "holders/", TTL: time.Second})
	if err != nil {
		return nil, e, err
	}
	c, err := leasefence.NewClient(leasefence.ClientOptions{Clock: leasefence.NewMonotonicClock(leasefence.Domain(holder)), Holder: holder})
	if err != nil {
		return nil, e, err
	}
	var svc leasefence.Service = coord
	if renewed != nil {
		svc = renewals{coord, renewed}
	}
	s, err := leasefence.Hold(ctx, svc, c, "res-1", leasefence.HoldOptions{})
	return s, e, err
}

// renewals is a Service that calls renewed after each renewal granted.
type renewals struct {
	leasefence.Service
	renewed func()
}

func (r renewals) Renew(ctx context.Context, req leasefence.RenewRequest) (leasefence.RenewOutcome, error) {
	out, err := r.Service.Renew(ctx, req)
	if err == nil && out.OK {
		r.renewed()
	}
	return out, err
}

// renewedLine is what the holder prints after each renewal granted.
const renewedLine = "renewed"

// asHolder is a user's program: it holds res-1 with Hold, checks its
// session, says so, and waits for a line on stdin (where its parent
// pauses it), then says what its session says now and writes through the
// gate under its token, as a write already in flight would. It says
// renewedLine after each renewal granted, whenever that comes.
func asHolder(spec string) int {
	f := strings.Fields(spec)
	ctx := context.Background()
	s, e, err := holdOn(ctx, []string{f[0]}, f[1], "paused", func() { fmt.Println(renewedLine) })
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer e.Close()
	res, err := sqlitestore.AttachSQLite(f[2]).Resource(ctx, history.Fenced, "res-1", func() time.Duration { return 0 })
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Printf("checked %v\n", s.Err())
	bufio.NewReader(os.Stdin).ReadString('\n') // the check-to-write gap
	fmt.Printf("session %v; context %v\n", s.Err() != nil, s.Context().Err() != nil)
	err = res.Commit(ctx, s.Token(), 1)
	fmt.Printf("write %v\n", errors.Is(err, leasefence.ErrStaleFence))
	return 0
}

// A user's program that holds its lease with Hold keeps it while it runs,
// renewals and all; paused whole by SIGSTOP between its check and its
// write, its session is lost while it sleeps (etcd lets the lease go and
// another holder takes it and writes), and once continued it finds its
// session and its context ended, and its late write refused by the gate.
func TestHoldPausedProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := setup(t, registry.SQLite, overlap(time.Minute))
	e := s.Backend.(*etcdbackend.Etcd)
	sqlDir := s.Store.(*sqlitestore.SQLiteStore).Dir()
	gate, err := s.Store.Resource(t.Context(), history.Fenced, "res-1", func() time.Duration { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+e.Endpoints()[0]+" "+e.Prefix()+" "+sqlDir)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string)
	go func() {
		defer close(lines)
		for out := bufio.NewScanner(stdout); out.Scan(); {
			select {
			case lines <- out.Text():
			case <-t.Context().Done():
				return
			}
		}
	}()
	renewed := 0
	next := func() string { // the holder's next line, renewals and all
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait() // and its stderr read
				t.Fatalf("the holder ended after %d renewals: %s", renewed, stderr.String())
			}
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("the holder said nothing for 30s after %d renewals", renewed)
			return ""
		}
	}
	line := func() string { // the next line that is not a renewal's
		for {
			if l := next(); l != renewedLine {
				return l
			}
			renewed++
		}
	}
	if l := line(); l != "checked <nil>" {
		t.Fatalf("the holder says %q, want its check passed", l)
	}
	// Held through six renewals, each a third of the TTL after the last
	// (two TTLs in all), renewing in the background: nobody else gets it.
	for renewed < 6 {
		if l := next(); l != renewedLine {
			t.Fatalf("after %d renewals the holder says %q, want renewals", renewed, l)
		}
		renewed++
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, early, err := holdOn(ctx, e.Endpoints(), e.Prefix(), "early", nil)
	if err == nil {
		t.Error("another holder got the lease while the holder ran")
	}
	if early != nil {
		early.Close()
	}
	cancel()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGSTOP)
	taker, te, err := holdOn(t.Context(), e.Endpoints(), e.Prefix(), "taker", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer te.Close()
	if err := gate.Commit(t.Context(), taker.Token(), 2); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
	fmt.Fprintln(stdin)
	if l := line(); l != "session true; context true" {
		t.Errorf("after the pause the holder says %q, want its session and context ended", l)
	}
	if l := line(); l != "write true" {
		t.Errorf("the late write: %q, want refused as stale", l)
	}
	cmd.Wait()
	// Woken, the holder's renewal that its session gave up on ends with
	// its context; etcd's client, left at its default logger, would warn
	// of it on every wake ("retrying of unary invoker failed ... context
	// canceled"). The lab's clients log nothing.
	if strings.Contains(stderr.String(), "retrying of unary invoker") {
		t.Errorf("the woken holder's etcd client logged:\n%s", stderr.String())
	}
}
