package redislease_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/redislease"
)

// marshaler is an argument go-redis sends as whatever MarshalBinary returns.
type marshaler string

func (m marshaler) MarshalBinary() ([]byte, error) { return []byte(m), nil }

// boxed is a BinaryMarshaler that fmt.Sprint does not print as its bytes
// ("{EVAL}"), which is how go-redis's Cmder.Name reads a name it cannot.
type boxed struct{ b string }

func (m boxed) MarshalBinary() ([]byte, error) { return []byte(m.b), nil }

// shifty answers MarshalBinary with something harmless the first time and
// with its key every time after: a guard that marshals to judge and lets
// go-redis marshal again to send would be fooled.
type shifty struct {
	key   string
	calls *int
}

func (s shifty) MarshalBinary() ([]byte, error) {
	*s.calls++
	if *s.calls == 1 {
		return []byte("harmless"), nil
	}
	return []byte(s.key), nil
}

// A command queued in a Commit reaches the gate's keys however its
// arguments are typed (*string, a BinaryMarshaler, a BinaryMarshaler as the
// command's name, net.IP): the guard judges each as go-redis will send it,
// refuses before anything is sent, and names the command and the key. The
// floor stays where fence 10 put it, and fence 3 stays refused.
func TestGateGuardReadsEveryArgumentType(t *testing.T) {
	c := needRedis(t)
	prefix := newPrefix(t)
	g := openGate(t, c, prefix, "r", redislease.GateOptions{})
	ctx := t.Context()
	if err := g.Commit(ctx, tok("r", "new", 10), "v10"); err != nil {
		t.Fatal(err)
	}
	floor := "{" + prefix + "}gate:r:floor"
	calls := 0
	for _, tc := range []struct {
		name, command string
		write         func(p redis.Pipeliner)
	}{
		{"DEL of a *string", "del", func(p redis.Pipeliner) { p.Do(ctx, "del", &floor) }},
		{"DEL of a BinaryMarshaler", "del", func(p redis.Pipeliner) { p.Do(ctx, "del", marshaler(floor)) }},
		{"HSET of a *string", "hset", func(p redis.Pipeliner) { p.Do(ctx, "hset", &floor, "f", "1") }},
		{"EVAL named by a BinaryMarshaler", "eval", func(p redis.Pipeliner) {
			p.Do(ctx, boxed{"EVAL"}, "return redis.call('del', KEYS[1])", 1, "app:x")
		}},
		{"EVAL named by a *string", "eval", func(p redis.Pipeliner) {
			name := "eval"
			p.Do(ctx, &name, "return redis.call('del', KEYS[1])", 0)
		}},
		{"DEL of a BinaryMarshaler struct", "del", func(p redis.Pipeliner) { p.Do(ctx, boxed{"del"}, boxed{floor}) }},
		{"DEL of a net.IP", "del", func(p redis.Pipeliner) { p.Do(ctx, "del", net.IP(floor)) }},
	} {
		err := g.Gate.Commit(ctx, tok("r", "new", 10), func(ctx context.Context, p redis.Pipeliner) error {
			p.RPush(ctx, g.data, tc.name)
			tc.write(p)
			return nil
		})
		if !errors.Is(err, redislease.ErrReservedKey) || !strings.Contains(err.Error(), tc.command) {
			t.Errorf("Commit with %s = %v, want ErrReservedKey naming %s", tc.name, err, tc.command)
		} else if tc.command == "del" && !strings.Contains(err.Error(), floor) {
			t.Errorf("Commit with %s = %v, want the key %q named", tc.name, err, floor)
		}
	}
	wantState(t, g, tok("r", "new", 10), []string{"v10"})
	// A marshaler is asked once: what the guard judged is what is sent.
	err := g.Gate.Commit(ctx, tok("r", "new", 10), func(ctx context.Context, p redis.Pipeliner) error {
		p.Do(ctx, "del", shifty{floor, &calls})
		return nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("Commit with a marshaler that changes its answer = %v after %d calls, want nil after 1", err, calls)
	}
	wantState(t, g, tok("r", "new", 10), []string{"v10"})
	if err := g.Commit(ctx, tok("r", "old", 3), "v3"); !errors.Is(err, leasefence.ErrStaleFence) {
		t.Fatalf("fence 3 after fence 10: %v, want ErrStaleFence", err)
	}
}

// An argument go-redis cannot send, or that the guard cannot read, is
// refused before anything is sent, naming the command and the type.
func TestGateGuardRefusesUnreadableArguments(t *testing.T) {
	c := needRedis(t)
	g := openGate(t, c, newPrefix(t), "r", redislease.GateOptions{})
	type named string
	for _, arg := range []any{named("x"), struct{}{}, []string{"a"}, failing{}} {
		err := g.Gate.Commit(t.Context(), tok("r", "a", 1), func(ctx context.Context, p redis.Pipeliner) error {
			p.Do(ctx, "set", "app:k", arg)
			return nil
		})
		if !errors.Is(err, redislease.ErrReservedKey) || !strings.Contains(err.Error(), "set") || !strings.Contains(err.Error(), fmt.Sprintf("%T", arg)) {
			t.Errorf("Commit with a %T argument = %v, want ErrReservedKey naming set and the type", arg, err)
		}
	}
	wantState(t, g, leasefence.Token{}, nil)
}

type failing struct{}

var errMarshal = errors.New("cannot marshal")

func (failing) MarshalBinary() ([]byte, error) { return nil, errMarshal }

// recorder is a go-redis client whose connection is a fake server that
// records every command as it arrives, byte for byte, and answers each
// with an error: the oracle of how go-redis encodes an argument.
type recorder struct {
	client *redis.Client
	got    chan []string
}

func newRecorder(tb testing.TB) *recorder {
	r := &recorder{got: make(chan []string, 16)}
	r.client = redis.NewClient(&redis.Options{
		Protocol: 2, DisableIdentity: true, MaxRetries: -1, PoolSize: 1,
		DialTimeout: time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		Dialer: func(ctx context.Context, _, _ string) (net.Conn, error) {
			server, client := net.Pipe()
			go r.serve(server)
			return client, nil
		},
	})
	tb.Cleanup(func() { r.client.Close() })
	return r
}

// serve reads RESP arrays of bulk strings and answers each with an error.
func (r *recorder) serve(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	for {
		args, err := readArray(br)
		if err != nil {
			return
		}
		if len(args) == 0 || strings.ToLower(args[0]) != "hello" {
			r.got <- args
		}
		if _, err := conn.Write([]byte("-ERR recorded\r\n")); err != nil {
			return
		}
	}
}

func readArray(br *bufio.Reader) ([]string, error) {
	n, err := readLen(br, '*')
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		size, err := readLen(br, '$')
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2) // and CRLF
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

// readLen reads a RESP line "<kind><n>\r\n" and returns n.
func readLen(br *bufio.Reader, kind byte) (int, error) {
	line, err := br.ReadString('\n')
	if err != nil || len(line) < 3 || line[0] != kind {
		return 0, fmt.Errorf("not a %c line: %q, %v", kind, line, err)
	}
	return strconv.Atoi(strings.TrimSpace(line[1:]))
}

// wire is the command as go-redis sends it, or ok false when go-redis
// refuses to send it (an argument it cannot marshal).
func (r *recorder) wire(tb testing.TB, args []any) ([]string, bool) {
	tb.Helper()
	cmd := redis.NewCmd(context.Background(), args...)
	_ = r.client.Process(context.Background(), cmd)
	select {
	case got := <-r.got:
		return got, true
	default:
	}
	if err := cmd.Err(); err == nil || !strings.Contains(err.Error(), "can't marshal") && !errors.Is(err, errMarshal) {
		tb.Fatalf("%#v was neither recorded nor refused by go-redis: %v", args, err)
	}
	return nil, false
}

// FuzzGuard builds commands of arguments of every type go-redis accepts
// (and some it does not), and holds the guard to what go-redis actually
// sends, read back by a fake server: a command is refused if and only if
// go-redis cannot send it, its name can reach any key, or one of its
// arguments as sent begins like a reserved key; and a command the guard
// lets through is sent exactly as it was judged.
func FuzzGuard(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{1, 1, 1, 1, 0, 4, 0})
	f.Add([]byte{4, 0, 1, 3, 4, 0, 2, 1})
	f.Add([]byte{5, 2, 6, 1, 0, 3, 9, 0, 12, 1})
	f.Add([]byte("\x03\x0a\x02{test}gate:r:floor"))
	rec := newRecorder(f)
	g, err := redislease.NewGate(rec.client, "r", redislease.GateOptions{Prefix: "test"})
	if err != nil {
		f.Fatal(err)
	}
	reserved := []string{"{test}fence", "{test}holder:", "{test}last:", "{test}req:", "{test}gate:"}
	f.Fuzz(func(t *testing.T, data []byte) {
		args := fuzzArgs(data)
		want, sendable := rec.wire(t, args)
		cmd := redis.NewCmd(context.Background(), args...)
		err := g.CheckCmd(cmd)
		if !sendable {
			if !errors.Is(err, redislease.ErrReservedKey) {
				t.Fatalf("%#v, which go-redis cannot send: guard = %v", args, err)
			}
			return
		}
		bad := len(want) > 0 && redislease.ReachesAnyKey(want[0])
		for _, a := range want[min(1, len(want)):] {
			for _, r := range reserved {
				bad = bad || strings.HasPrefix(a, r)
			}
		}
		if bad != (err != nil) || (err != nil && !errors.Is(err, redislease.ErrReservedKey)) {
			t.Fatalf("%#v sent as %q: guard = %v", args, want, err)
		}
		if err == nil {
			if got, _ := rec.wire(t, cmd.Args()); !slicesEqual(got, want) {
				t.Fatalf("%#v judged, then sent as %q, not %q", args, got, want)
			}
		}
	})
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00") && len(a) == len(b)
}

// fuzzArgs reads a command from data: for each argument, a type and a text.
func fuzzArgs(data []byte) []any {
	texts := []string{"{test}gate:r:floor", "{test}fence", "app:k", "eval", "EVAL", "flushdb", "del", "{test}holder:r", "{other}gate:r:floor", ""}
	var args []any
	for len(data) >= 2 && len(args) < 6 {
		kind, pick := data[0], data[1]
		data = data[2:]
		s := texts[int(pick)%len(texts)]
		if pick >= 200 && len(data) > 0 { // a text of the input's own bytes
			n := min(int(data[0])%16, len(data)-1)
			s, data = string(data[1:1+n]), data[1+n:]
		}
		args = append(args, fuzzArg(kind, s))
	}
	if len(args) == 0 {
		args = append(args, "get")
	}
	return args
}

type unsendable string

func fuzzArg(kind byte, s string) any {
	n := len(s)
	switch kind % 20 {
	case 0:
		return s
	case 1:
		return &s
	case 2:
		return []byte(s)
	case 3:
		return marshaler(s)
	case 4:
		m := marshaler(s)
		return &m
	case 5:
		return net.IP(s)
	case 6:
		return unsendable(s)
	case 7:
		return n
	case 8:
		return &n
	case 9:
		return float64(n) / 3
	case 10:
		return n%2 == 0
	case 11:
		return time.Duration(n)
	case 12:
		return nil
	case 13:
		return (*string)(nil)
	case 14:
		return failing{}
	case 15:
		return time.Unix(int64(n), 0).UTC()
	case 16:
		return uint8(n)
	case 17:
		return []string{s}
	case 18:
		return boxed{s}
	}
	return int32(-n)
}
