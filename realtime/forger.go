package realtime

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencehttp"
	"github.com/leasefence/lab/leasefence/fencetoken"
	"github.com/leasefence/lab/spec"
)

// Forgers are writers with no lease. Each presents, with every write, a
// proof it made up (spec.Forgery): signed with a key of its own, a
// genuine proof with its claims rewritten, an unsigned one (alg "none"),
// or a genuine proof for another resource. All but the last claim the
// highest fence there is. A forger's write goes over the same wire as
// every other and is judged from the resource's record like any other:
// if it lands, the history has a ForgeryLanded; a refusal is a
// ForgeryRefused. The checker holds the fenced mode to none landed.

// genuine keeps the newest proof the coordinator signed for each
// resource: what a forger tampers with or replays, as one that sniffed
// the wire would.
type genuine struct {
	mu     sync.Mutex
	leases []leasefence.Lease // per resource; zero until a grant
}

func (g *genuine) set(ri int, l leasefence.Lease) {
	if l.Proof == "" || ri < 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.leases == nil {
		g.leases = make([]leasefence.Lease, ri+1)
	}
	for len(g.leases) <= ri {
		g.leases = append(g.leases, leasefence.Lease{})
	}
	g.leases[ri] = l
}

// get returns the newest genuine lease of resource ri, or, with other,
// of any resource but ri.
func (g *genuine) get(ri int, other bool) (leasefence.Lease, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := len(g.leases) - 1; i >= 0; i-- {
		if (i == ri) != other && g.leases[i].Proof != "" {
			return g.leases[i], true
		}
	}
	return leasefence.Lease{}, false
}

// forgedFence is the fence every forger but the replayer claims.
const forgedFence = leasefence.Fence(math.MaxUint64)

// forge makes up the lease forger name presents at resource res, or
// reports that it has nothing to work from yet (no genuine proof seen).
func forge(kind spec.Forgery, name, res string, ri int, g *genuine, own *fencetoken.Signer) (leasefence.Lease, bool, error) {
	claim := leasefence.Token{Holder: name, Resource: res, Fence: forgedFence}
	switch kind {
	case spec.ForgeOwnKey:
		proof, err := own.Prove(claim)
		return leasefence.Lease{Token: claim, Proof: proof}, err == nil, err
	case spec.ForgeTampered:
		l, ok := g.get(ri, false)
		if !ok {
			return leasefence.Lease{}, false, nil
		}
		proof, err := tamper(l.Proof, claim)
		return leasefence.Lease{Token: claim, Proof: proof}, err == nil, err
	case spec.ForgeAlgNone:
		return leasefence.Lease{Token: claim, Proof: unsigned(claim)}, true, nil
	case spec.ForgeReplayed:
		l, ok := g.get(ri, true)
		return l, ok, nil
	}
	return leasefence.Lease{}, false, fmt.Errorf("realtime: unknown forgery %q", kind)
}

var b64 = base64.RawURLEncoding

func claims(t leasefence.Token) []byte {
	b, _ := json.Marshal(map[string]any{"iss": HTTPIssuer, "sub": t.Holder, "lf_res": t.Resource,
		"lf_fence": strconv.FormatUint(uint64(t.Fence), 10), "iat": time.Now().Unix()})
	return b
}

// tamper rewrites a signed proof's claims to t, keeping its header and
// signature.
func tamper(proof string, t leasefence.Token) (string, error) {
	parts := strings.Split(proof, ".")
	if len(parts) != 3 {
		return "", errors.New("realtime: tamper: not a compact JWS")
	}
	return parts[0] + "." + b64.EncodeToString(claims(t)) + "." + parts[2], nil
}

// unsigned is a proof of t with header alg "none" and no signature.
func unsigned(t leasefence.Token) string {
	head := `{"alg":"none","typ":"JWT","kid":"` + HTTPKeyID + `"}`
	return b64.EncodeToString([]byte(head)) + "." + b64.EncodeToString(claims(t)) + "."
}

// startForgers starts the world's forgers, if the scenario has any: each
// writes every half TTL, from a half TTL into the run (staggered), at the
// resources in turn.
func (w *world) startForgers() error {
	r := w.r
	if len(r.sc.Forgers) == 0 {
		return nil
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	own, err := fencetoken.NewSigner(priv, HTTPKeyID, HTTPIssuer)
	if err != nil {
		return err
	}
	n := len(r.sc.Forgers)
	every := max(r.sc.TTL/2, time.Millisecond)
	for i, kind := range r.sc.Forgers {
		name := spec.ForgerName(i)
		first := every + time.Duration(i)*every/time.Duration(n)
		r.spawn(func(ctx context.Context) {
			for k := 0; sleep(ctx, first+time.Duration(k)*every-r.now()) == nil; k++ {
				if err := w.forgedWrite(ctx, kind, name, (i+k)%len(w.resources), own); err != nil {
					w.r.emit(w.mode, history.Event{Kind: history.LibraryError, Agent: -1, Resource: -1, Other: -1,
						Detail: name + ": " + err.Error()})
					return
				}
			}
		})
	}
	return nil
}

// forgedWrite is one write of a forger at resource ri: its landing is
// the resource's to record; a refusal is recorded here.
func (w *world) forgedWrite(ctx context.Context, kind spec.Forgery, name string, ri int, own *fencetoken.Signer) error {
	r := w.r
	lease, ok, err := forge(kind, name, r.h.Resources[ri], ri, &w.genuine, own)
	if err != nil || !ok {
		return err
	}
	tmpl := history.Event{Kind: history.ForgeryLanded, Agent: -1, Resource: ri, Other: -1, Fence: lease.Token.Fence,
		Outcome: history.Outcome(kind), Detail: name}
	id := w.writes.add(&tmpl)
	wctx, cancel := context.WithTimeout(fencehttp.WithLease(ctx, lease), max(10*r.sc.TTL, writeTimeout))
	defer cancel()
	res := w.resources[ri]
	if w.discipline == history.DisciplineNaive {
		err = res.Write(wctx, lease.Token, id)
	} else {
		err = res.Commit(wctx, lease.Token, id)
	}
	var status int
	var herr *HTTPError
	var stale *leasefence.StaleFenceError
	switch {
	case err == nil:
		r.emitLive(w.mode, tmpl) // for a dashboard; the history has it from the record
		return nil
	case ctx.Err() != nil:
		return nil // the run ended
	case errors.As(err, &herr) && herr.Status < http.StatusInternalServerError:
		status = herr.Status
	case errors.As(err, &stale), errors.Is(err, leasefence.ErrTokenConflict):
		status = http.StatusConflict
	default:
		return fmt.Errorf("write at %s: %w", r.h.Resources[ri], err)
	}
	tmpl.Kind = history.ForgeryRefused
	tmpl.Detail = fmt.Sprintf("%s: %d %s", name, status, http.StatusText(status))
	r.emit(w.mode, tmpl)
	return nil
}
