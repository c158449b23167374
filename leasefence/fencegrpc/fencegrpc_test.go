package fencegrpc_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencegrpc"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

const issuer = "coordinators.test"

// deploy is a gRPC service written without generated code: Write commits
// one value through the gate, Writes one per message of a stream.
type deploy struct {
	gate    *leasefence.FenceGate
	calls   atomic.Int64 // handler invocations
	writes  atomic.Int64 // admitted writes
	refusal chan error   // the gate's refusals, as the server saw them
	// trusted is the token a server with no interceptor commits under,
	// taken as sent (the benchmarks' baseline); nil: a call with no
	// verified token is an error.
	trusted *leasefence.Token
}

func (d *deploy) commit(ctx context.Context) error {
	tok, ok := fencegrpc.Token(ctx)
	if !ok && d.trusted != nil {
		tok, ok = *d.trusted, true
	}
	if !ok {
		return status.Error(codes.Internal, "no token")
	}
	err := d.gate.Commit(ctx, tok, func(context.Context) error { d.writes.Add(1); return nil })
	if err != nil {
		select {
		case d.refusal <- err:
		default:
		}
	}
	if errors.Is(err, leasefence.ErrWrongResource) {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return fencegrpc.Status(err)
}

var deployDesc = grpc.ServiceDesc{
	ServiceName: "test.Deploy",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Write",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, _ any) (any, error) {
				d := srv.(*deploy)
				d.calls.Add(1)
				return in, d.commit(ctx)
			}
			if interceptor == nil {
				return h(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Deploy/Write"}, h)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Writes",
		ClientStreams: true,
		Handler: func(srv any, ss grpc.ServerStream) error {
			d := srv.(*deploy)
			d.calls.Add(1)
			for {
				var in wrapperspb.StringValue
				if err := ss.RecvMsg(&in); err == io.EOF {
					return ss.SendMsg(&in)
				} else if err != nil {
					return err
				}
				if err := d.commit(ss.Context()); err != nil {
					return err
				}
			}
		},
	}},
}

type world struct {
	signer   *fencetoken.Signer
	verifier *fencetoken.Verifier
	svc      *deploy
	conn     *grpc.ClientConn
	refused  atomic.Int64 // OnRefused calls
	lastErr  atomic.Value // the latest RefusedInfo.Err, as an errBox
}

type errBox struct{ err error }

// newWorld starts the deploy service behind the fence interceptors, and
// a client for it.
func newWorld(t testing.TB) *world { return startWorld(t, true) }

// startWorld starts the deploy service behind the fence interceptors, or
// behind none (a bare server that trusts what is sent), with a verifier
// made with vopts; and a client for it.
func startWorld(t testing.TB, intercept bool, vopts ...fencetoken.Option) *world {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{svc: &deploy{gate: leasefence.NewFenceGate("deploy/prod"), refusal: make(chan error, 1)}}
	w.signer, _ = fencetoken.NewSigner(priv, "k1", issuer)
	w.verifier, _ = fencetoken.NewVerifier(issuer, map[string]ed25519.PublicKey{"k1": pub}, vopts...)
	hook := fencegrpc.OnRefused(func(i fencegrpc.RefusedInfo) {
		if i.Err != nil && i.FullMethod != "" {
			w.refused.Add(1)
			w.lastErr.Store(errBox{i.Err})
		}
	})
	var sopts []grpc.ServerOption
	if intercept {
		sopts = append(sopts,
			grpc.UnaryInterceptor(fencegrpc.UnaryServerInterceptor(w.verifier, hook)),
			grpc.StreamInterceptor(fencegrpc.StreamServerInterceptor(w.verifier, hook)))
	}
	srv := grpc.NewServer(sopts...)
	srv.RegisterService(&deployDesc, w.svc)
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	w.conn, err = grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(fencegrpc.UnaryClientInterceptor()),
		grpc.WithStreamInterceptor(fencegrpc.StreamClientInterceptor()),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.conn.Close() })
	return w
}

func (w *world) lease(t testing.TB, holder string, fence leasefence.Fence) leasefence.Lease {
	t.Helper()
	tok := leasefence.Token{Resource: "deploy/prod", Holder: holder, Fence: fence}
	proof, err := w.signer.Prove(tok)
	if err != nil {
		t.Fatal(err)
	}
	return leasefence.Lease{Token: tok, Proof: proof}
}

func (w *world) write(ctx context.Context) error {
	return w.conn.Invoke(ctx, "/test.Deploy/Write", wrapperspb.String("v"), new(wrapperspb.StringValue))
}

func (w *world) writes(ctx context.Context, n int) error {
	s, err := w.conn.NewStream(ctx, &deployDesc.Streams[0], "/test.Deploy/Writes")
	if err != nil {
		return err
	}
	for range n {
		if err := s.SendMsg(wrapperspb.String("v")); err != nil {
			break // the server ended the stream: RecvMsg says why
		}
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	return s.RecvMsg(new(wrapperspb.StringValue))
}

func TestGenuineProofWrites(t *testing.T) {
	w := newWorld(t)
	ctx := fencegrpc.WithLease(t.Context(), w.lease(t, "agent-a", 3))
	if err := w.write(ctx); err != nil {
		t.Fatalf("unary: %v", err)
	}
	if err := w.writes(ctx, 3); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if n := w.svc.writes.Load(); n != 4 {
		t.Fatalf("%d writes, want 4", n)
	}
	if f := w.svc.gate.Floor(); f.Holder != "agent-a" || f.Fence != 3 {
		t.Fatalf("floor %v", f)
	}
}

// Every call the interceptors refuse: Unauthenticated with its reason, the
// handler never called, the gate untouched, failed verifications counted.
func TestInterceptorsRefuse(t *testing.T) {
	_, forgerKey, _ := ed25519.GenerateKey(rand.Reader)
	forger, _ := fencetoken.NewSigner(forgerKey, "k1", issuer)
	forged, _ := forger.Prove(leasefence.Token{Resource: "deploy/prod", Holder: "mallory", Fence: 1 << 62})
	for _, tc := range []struct {
		name     string
		md       []string // fence-token values, sent past the client interceptor
		reason   string
		verified bool
	}{
		{"no proof", nil, fencegrpc.ReasonMissingProof, false},
		{"empty proof", []string{""}, fencegrpc.ReasonMissingProof, false},
		{"forger's own key", []string{forged}, fencegrpc.ReasonInvalidProof, true},
		{"alg none", []string{"eyJhbGciOiJub25lIiwia2lkIjoiazEifQ.eyJzdWIiOiJtYWxsb3J5In0."}, fencegrpc.ReasonInvalidProof, true},
		{"tampered", []string{strings.Replace(forged, ".", ".x", 1)}, fencegrpc.ReasonInvalidProof, true},
		{"two proofs", []string{forged, forged}, fencegrpc.ReasonInvalidProof, true},
		{"two empty proofs", []string{"", ""}, fencegrpc.ReasonInvalidProof, true},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				w := newWorld(t)
				w.svc.gate.Admit(leasefence.Token{Resource: "deploy/prod", Holder: "agent-a", Fence: 5})
				before := w.svc.gate.Floor()
				ctx := t.Context()
				for _, p := range tc.md {
					ctx = metadata.AppendToOutgoingContext(ctx, fencegrpc.MetadataKey, p)
				}
				var err error
				if stream {
					err = w.writes(ctx, 2)
				} else {
					err = w.write(ctx)
				}
				st, _ := status.FromError(err)
				if st.Code() != codes.Unauthenticated || reasonOf(st) != tc.reason {
					t.Fatalf("got %v (reason %q), want Unauthenticated, %s", err, reasonOf(st), tc.reason)
				}
				if w.svc.calls.Load() != 0 || w.svc.writes.Load() != 0 {
					t.Fatalf("the handler ran: %d calls, %d writes", w.svc.calls.Load(), w.svc.writes.Load())
				}
				if w.svc.gate.Floor() != before || w.svc.gate.RejectionCount() != 0 {
					t.Fatalf("gate touched: %v", w.svc.gate.Floor())
				}
				if got, want := w.verifier.Refused(), map[bool]uint64{true: 1, false: 0}[tc.verified]; got != want {
					t.Fatalf("Verifier.Refused = %d, want %d", got, want)
				}
				if w.refused.Load() != 1 {
					t.Fatalf("OnRefused called %d times", w.refused.Load())
				}
				hookErr := w.lastErr.Load().(errBox).err
				if want := map[bool]error{true: fencetoken.ErrInvalid, false: fencegrpc.ErrMissingProof}[tc.verified]; !errors.Is(hookErr, want) {
					t.Fatalf("RefusedInfo.Err = %v, want it to wrap %v", hookErr, want)
				}
				if fencegrpc.Refusal(err) != nil {
					t.Fatal("Refusal of an Unauthenticated status is not nil")
				}
			})
		}
	}
}

func reasonOf(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// A stale holder's call, unary or streamed, comes back as the gate's
// *StaleFenceError, field for field.
func TestStaleRefusalAcrossTheWire(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			w := newWorld(t)
			if err := w.write(fencegrpc.WithLease(t.Context(), w.lease(t, "agent-b", 9))); err != nil {
				t.Fatal(err)
			}
			ctx := fencegrpc.WithLease(t.Context(), w.lease(t, "agent-a", 7))
			var err error
			if stream {
				err = w.writes(ctx, 2)
			} else {
				err = w.write(ctx)
			}
			if status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("got %v, want FailedPrecondition", err)
			}
			got := fencegrpc.Refusal(err)
			var stale, want *leasefence.StaleFenceError
			if !errors.As(got, &stale) || !errors.As(<-w.svc.refusal, &want) || *stale != *want {
				t.Fatalf("Refusal = %#v, the server's gate returned %#v", got, want)
			}
			if stale.Seq != 1 || stale.FloorHolder != "agent-b" || stale.FloorFence != 9 || stale.Holder != "agent-a" || stale.Fence != 7 {
				t.Fatalf("refusal %+v", stale)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	if fencegrpc.Status(nil) != nil {
		t.Fatal("Status(nil) != nil")
	}
	other := errors.New("disk full")
	if fencegrpc.Status(other) != other {
		t.Fatal("Status changed an unrelated error")
	}
	wrong := fmt.Errorf("x: %w", leasefence.ErrWrongResource)
	if fencegrpc.Status(wrong) != wrong {
		t.Fatal("Status changed ErrWrongResource")
	}
	for _, r := range []leasefence.Rejection{
		{Seq: 1 << 60, Resource: "r", Holder: "a", Fence: ^leasefence.Fence(0) - 1, FloorHolder: "b", FloorFence: ^leasefence.Fence(0)},
		{Seq: 2, Resource: "r", Holder: "a", Fence: 4, FloorHolder: "b", FloorFence: 4},
	} {
		err := fencegrpc.Status(fmt.Errorf("wrapped: %w", leasefence.RejectionError(r)))
		st, _ := status.FromError(err)
		if st.Code() != codes.FailedPrecondition {
			t.Fatalf("code %v", st.Code())
		}
		info := st.Details()[0].(*errdetails.ErrorInfo)
		if info.Domain != "leasefence" || info.Metadata["fence"] != fmt.Sprint(uint64(r.Fence)) || info.Metadata["seq"] != fmt.Sprint(r.Seq) {
			t.Fatalf("ErrorInfo %v", info)
		}
		back := fencegrpc.Refusal(err)
		var stale *leasefence.StaleFenceError
		var conflict *leasefence.TokenConflictError
		switch {
		case errors.As(back, &stale) && r.Fence < r.FloorFence && stale.Rejection == r && info.Reason == fencegrpc.ReasonStaleFence:
		case errors.As(back, &conflict) && r.Fence == r.FloorFence && conflict.Rejection == r && info.Reason == fencegrpc.ReasonTokenConflict:
			if !errors.Is(back, leasefence.ErrTokenConflict) {
				t.Fatal("a conflict does not match ErrTokenConflict")
			}
		default:
			t.Fatalf("round trip of %+v: %v (reason %s)", r, back, info.Reason)
		}
	}
	for _, err := range []error{nil, other, status.Error(codes.FailedPrecondition, "no details"), status.Error(codes.Unavailable, "down")} {
		if fencegrpc.Refusal(err) != nil {
			t.Errorf("Refusal(%v) != nil", err)
		}
	}
}

func TestClientWithoutProof(t *testing.T) {
	w := newWorld(t)
	ctx := fencegrpc.WithLease(t.Context(), leasefence.Lease{Token: leasefence.Token{Resource: "deploy/prod", Holder: "a", Fence: 1}})
	if err := w.write(ctx); !errors.Is(err, fencegrpc.ErrNoProof) {
		t.Fatalf("unary with an unproved lease: %v", err)
	}
	if err := w.writes(ctx, 1); !errors.Is(err, fencegrpc.ErrNoProof) {
		t.Fatalf("stream with an unproved lease: %v", err)
	}
	if w.svc.calls.Load() != 0 {
		t.Fatal("a call reached the server")
	}
}

func TestConcurrentCalls(t *testing.T) {
	w := newWorld(t)
	const holders, each = 8, 20
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for h := range holders {
		ctx := fencegrpc.WithLease(t.Context(), w.lease(t, fmt.Sprint("agent-", h), leasefence.Fence(h+1)))
		wg.Go(func() {
			for range each {
				err := w.write(ctx)
				switch {
				case err == nil:
					admitted.Add(1)
				case errors.Is(fencegrpc.Refusal(err), leasefence.ErrStaleFence):
					refused.Add(1)
				default:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load()+refused.Load() != holders*each || admitted.Load() != w.svc.writes.Load() || w.svc.gate.Floor().Fence != holders {
		t.Fatalf("%d admitted, %d refused, %d writes, floor %v", admitted.Load(), refused.Load(), w.svc.writes.Load(), w.svc.gate.Floor())
	}
}
