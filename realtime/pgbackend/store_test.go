package pgbackend_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/sqlgate"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/realtime/pgbackend"
)

// A holder whose lease ended writes before anyone else has: the floor
// alone admits it, the gate that checks the lease refuses it for the
// lease, and the runner records that refusal as one.
func TestLeaseGateRefusesALapsedHolder(t *testing.T) {
	ctx := t.Context()
	p := open(t)
	svc, err := p.Open(ctx, history.Fenced, leasefence.NewMonotonicClock("test"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Duration { return 0 }
	for _, tc := range []struct {
		gate  string
		lease bool
	}{{pgbackend.GateFloor, false}, {pgbackend.GateLease, true}} {
		t.Run(tc.gate, func(t *testing.T) {
			res, err := pgbackend.Store{P: p, Lease: tc.lease}.Resource(ctx, history.Fenced, "r-"+tc.gate, now)
			if err != nil {
				t.Fatal(err)
			}
			got, err := svc().Acquire(ctx, leasefence.AcquireRequest{RequestID: "req-" + tc.gate, Resource: "r-" + tc.gate, Holder: "a"})
			if err != nil || !got.OK {
				t.Fatalf("acquire: %+v %v", got, err)
			}
			tok := got.Grant.Token
			if err := res.Commit(ctx, tok, 1); err != nil {
				t.Fatalf("a live lease's write: %v", err)
			}
			if out, err := svc().Release(ctx, tok); err != nil || !out.OK {
				t.Fatalf("release: %+v %v", out, err)
			}
			fate, call, err := realtime.Land(ctx, res, history.DisciplineFenced, tok, 2)
			if err != nil {
				t.Fatalf("%s: %v", call, err)
			}
			if !tc.lease {
				if !fate.Landed {
					t.Fatalf("the floor alone refused the released lease's write: %+v", fate)
				}
				return
			}
			if fate.Landed || !fate.LeaseNotLive || fate.NotLogged || fate.Floor.Holder != tok.Holder || fate.Floor.Fence != tok.Fence {
				t.Fatalf("the released lease's write: %+v, want refused for the lease by the floor %v", fate, tok)
			}
			e := fate.Refusal(history.Event{Kind: history.CommitAdmitted, Agent: 0}, []string{"a"})
			if e.Kind != history.CommitRefused || e.Outcome != history.OutcomeLeaseNotLive || e.Other != 0 || e.OtherFence != tok.Fence {
				t.Errorf("its event: %+v", e)
			}
			err = res.Commit(ctx, tok, 3)
			var lr *realtime.LeaseRefusedError
			if !errors.As(err, &lr) || !errors.Is(err, sqlgate.ErrLeaseNotLive) {
				t.Errorf("Commit: %v, want a *realtime.LeaseRefusedError wrapping sqlgate's", err)
			}
			landed, err := res.Landings(ctx)
			if err != nil || len(landed) != 1 || landed[0].ID != 1 {
				t.Errorf("landings %v %v, want the live lease's write alone", landed, err)
			}
		})
	}
}

// The gate's name is checked before any run: a typo is refused naming
// the key and the choices.
func TestGateSettingIsChecked(t *testing.T) {
	c := realtime.Config{Backend: "postgres", Settings: pgbackend.Settings{Gate: "leases"}.Entry()}
	err := realtime.CheckSettings(c)
	if err == nil || !contains(err.Error(), "gate", `"leases"`, "floor", "lease") {
		t.Errorf("gate leases: %v, want the key, the value and the choices", err)
	}
	if err := realtime.CheckSettings(realtime.Config{Backend: "postgres", Settings: pgbackend.Settings{Gate: pgbackend.GateLease}.Entry()}); err != nil {
		t.Errorf("gate lease: %v", err)
	}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
