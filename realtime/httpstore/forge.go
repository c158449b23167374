package httpstore

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencetoken"
	"github.com/leasefence/lab/spec"
)

// The coordinator's key id and issuer name in the proofs of a run on an
// HTTPStore. The key itself is generated for each store.
const (
	keyID  = "lab-run"
	issuer = "leasefence-lab"
)

// statusError is a server's answer to a write that is neither a success
// nor a refusal by its gate: 428 (no proof), 401 (a proof that failed
// verification), 403 (a genuine proof for another resource), or worse.
type statusError struct {
	Status  int
	Message string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// forgerKey is the key the forgers that sign their own proofs sign with:
// one of their own, of the same kind and id as the coordinator's.
func forgerKey() (*fencetoken.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return fencetoken.NewSigner(priv, keyID, issuer)
}

// Forge implements realtime.ForgingStore: a proof signed with the
// forgers' own key, a genuine proof with its claims rewritten, an
// unsigned one (alg "none"), or a genuine proof for another resource
// replayed as it is.
func (s *HTTPStore) Forge(kind spec.Forgery, claim leasefence.Token, genuine func(other bool) (leasefence.Lease, bool)) (leasefence.Lease, bool, error) {
	switch kind {
	case spec.ForgeOwnKey:
		proof, err := s.forger.Prove(claim)
		return leasefence.Lease{Token: claim, Proof: proof}, err == nil, err
	case spec.ForgeTampered:
		l, ok := genuine(false)
		if !ok {
			return leasefence.Lease{}, false, nil
		}
		proof, err := tamper(l.Proof, claim)
		return leasefence.Lease{Token: claim, Proof: proof}, err == nil, err
	case spec.ForgeAlgNone:
		return leasefence.Lease{Token: claim, Proof: unsigned(claim)}, true, nil
	case spec.ForgeReplayed:
		l, ok := genuine(true)
		return l, ok, nil
	}
	return leasefence.Lease{}, false, fmt.Errorf("realtime: unknown forgery %q", kind)
}

// Refusal implements realtime.ForgingStore: a server's answer below 500,
// or its gate's refusal (409 Conflict), as "<status> <text>".
func (*HTTPStore) Refusal(err error) (string, bool) {
	var status int
	var herr *statusError
	var stale *leasefence.StaleFenceError
	switch {
	case errors.As(err, &herr) && herr.Status < http.StatusInternalServerError:
		status = herr.Status
	case errors.As(err, &stale), errors.Is(err, leasefence.ErrTokenConflict):
		status = http.StatusConflict
	default:
		return "", false
	}
	return fmt.Sprintf("%d %s", status, http.StatusText(status)), true
}

var b64 = base64.RawURLEncoding

func claims(t leasefence.Token) []byte {
	b, _ := json.Marshal(map[string]any{"iss": issuer, "sub": t.Holder, "lf_res": t.Resource,
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
	head := `{"alg":"none","typ":"JWT","kid":"` + keyID + `"}`
	return b64.EncodeToString([]byte(head)) + "." + b64.EncodeToString(claims(t)) + "."
}
