package fencetoken

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/leasefence/lab/leasefence"
)

// ErrInvalid is wrapped by every refusal of Verify: the proof is malformed,
// its signature does not verify, its kid is missing or unknown, its issuer
// is not the verifier's, its alg is not EdDSA (alg "none" and HMAC
// included), or its claims are bad.
var ErrInvalid = errors.New("fencetoken: invalid proof")

// ErrUnsignable is wrapped by every refusal of Signer.Prove: a token no
// coordinator issues (an id that breaks the rule of leasefence.MaxIDLen,
// which also matches leasefence.ErrInvalidRequest, or fence 0). The grant
// it was for fails with it. Every token a coordinator issues is signed,
// within MaxProofLength.
var ErrUnsignable = errors.New("fencetoken: token cannot be signed")

// Alg is the only JWS algorithm a proof is signed or verified with.
const Alg = "EdDSA"

// The claims a proof carries besides iss, sub and iat.
const (
	ClaimResource = "lf_res"
	ClaimFence    = "lf_fence"
)

// Signer signs tokens with one Ed25519 key. It is a leasefence.Prover and
// is safe for concurrent use.
type Signer struct {
	key    ed25519.PrivateKey
	keyID  string
	issuer string
	now    func() time.Time // for iat, which is informational
}

var _ leasefence.Prover = (*Signer)(nil)

// NewSigner returns a signer that signs with key, names keyID in each
// proof's header (the verifier finds the public key by it) and issuer in its
// iss claim. It fails when the key is not an Ed25519 private key, keyID or
// issuer is empty, or they are so long that the proof of the longest valid
// ids would be longer than MaxProofLength (together they may take some 300
// bytes of plain text).
func NewSigner(key ed25519.PrivateKey, keyID, issuer string) (*Signer, error) {
	switch {
	case len(key) != ed25519.PrivateKeySize:
		return nil, fmt.Errorf("fencetoken: NewSigner: an Ed25519 private key has %d bytes, got %d", ed25519.PrivateKeySize, len(key))
	case keyID == "":
		return nil, errors.New("fencetoken: NewSigner: empty key id")
	case issuer == "":
		return nil, errors.New("fencetoken: NewSigner: empty issuer")
	}
	s := &Signer{key: key, keyID: keyID, issuer: issuer, now: time.Now}
	p, err := s.sign(longestProof, math.MinInt64)
	if err != nil {
		return nil, fmt.Errorf("fencetoken: NewSigner: %w", err)
	}
	if len(p) > MaxProofLength {
		return nil, fmt.Errorf("fencetoken: NewSigner: with a key id of %d bytes and an issuer of %d bytes, the proof of the longest valid ids would be %d bytes, more than MaxProofLength (%d)",
			len(keyID), len(issuer), len(p), MaxProofLength)
	}
	return s, nil
}

// longestProof is the token with the longest proof: ids of MaxIDLen bytes
// that JSON writes at two bytes a byte, the most any valid id takes
// (leasefence.MaxIDLen says why), and the longest fence. Signed with the
// longest iat, its proof bounds every proof of a Signer.
var longestProof = leasefence.Token{
	Resource: strings.Repeat(`"`, leasefence.MaxIDLen),
	Holder:   strings.Repeat(`"`, leasefence.MaxIDLen),
	Fence:    math.MaxUint64,
}

// KeyID returns the key id the signer names in its proofs.
func (s *Signer) KeyID() string { return s.keyID }

// Prove signs t: a compact JWS with the claims described in the package
// doc. It refuses, with an error wrapping ErrUnsignable, a token no
// coordinator issues (leasefence.ValidateToken: ids empty, longer than
// leasefence.MaxIDLen, not valid UTF-8, which JSON would rewrite to U+FFFD
// and so give two holders one name, or with control characters; fence 0).
// Every other token is signed, in at most MaxProofLength bytes, and every
// proof Prove returns verifies.
func (s *Signer) Prove(t leasefence.Token) (string, error) {
	if err := leasefence.ValidateToken(t); err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnsignable, err)
	}
	p, err := s.sign(t, s.now().Unix())
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnsignable, err)
	}
	return p, nil
}

// header is a proof's JOSE header, its members in the order golang-jwt
// writes them.
type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// sign returns the compact JWS of t's claims with iat, signed by
// golang-jwt's EdDSA method. The JSON is written here rather than by
// jwt.Token.SignedString, whose json.Marshal escapes '<', '>' and '&' to
// six bytes each (JSON does not ask it; no JOSE library needs it): a
// holder of 1,024 '<' would need a proof of 8 kB. Written plain, no byte of
// a valid id takes more than two, so longestProof bounds every proof.
func (s *Signer) sign(t leasefence.Token, iat int64) (string, error) {
	h, err := plainJSON(header{Alg: Alg, Kid: s.keyID, Typ: "JWT"})
	if err != nil {
		return "", err
	}
	c, err := plainJSON(signedClaims{
		Issuer:   s.issuer,
		Subject:  t.Holder,
		Resource: t.Resource,
		Fence:    strconv.FormatUint(uint64(t.Fence), 10),
		IssuedAt: iat,
	})
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	input := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	sig, err := jwt.SigningMethodEdDSA.Sign(input, s.key)
	if err != nil {
		return "", err
	}
	return input + "." + enc.EncodeToString(sig), nil
}

// plainJSON is json.Marshal without its HTML escaping.
func plainJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// MaxProofLength bounds the proofs Verify parses, and those a Signer
// makes: the proof of any two valid ids fits (the longest, two ids of
// leasefence.MaxIDLen bytes that JSON writes at two bytes a byte, takes
// about 5.7 kB; ids of plain ASCII letters about 3 kB; those of real
// deployments some hundreds of bytes), with room for a key id and an
// issuer that NewSigner checks. A longer proof is refused before any
// decoding. A Fence-Token header line of this length passes an HTTP proxy
// that allows 8 KiB a line (nginx's default), and gRPC metadata within 8
// KiB (grpc-java's default).
const MaxProofLength = 6144

// DefaultCacheSize is how many verified proofs a Verifier remembers unless
// WithCacheSize says otherwise.
const DefaultCacheSize = 1024

// Option configures a Verifier.
type Option func(*Verifier)

// WithCacheSize bounds the verifier's cache of verified proofs; 0 turns it
// off, so every Verify checks a signature.
func WithCacheSize(n int) Option { return func(v *Verifier) { v.cache.limit = max(n, 0) } }

// Verifier checks proofs against a set of public keys. It is safe for
// concurrent use.
//
// A lease writes many times under one proof, so the verifier remembers the
// proofs it has verified, up to a bound (the oldest is forgotten first), and
// answers a repeated one without checking the signature again. That is
// exactly as strict as checking it: a proof is a string, its verdict is a
// function of that string and of the verifier's keys and issuer, and those
// never change (rotating keys is a new Verifier, with an empty cache). Only
// proofs that verified are remembered, so a forger can neither fill the
// cache nor go uncounted.
type Verifier struct {
	issuer  string
	keys    map[string]ed25519.PublicKey
	parser  *jwt.Parser
	refused atomic.Uint64
	cache   proofCache
}

// NewVerifier returns a verifier that accepts proofs from issuer signed by
// one of keys, found by the proof's kid. Give it several keys while one is
// rotated: the new one for fresh proofs, the old one until the leases it
// proved have ended. The map is copied. It fails when there is no key, a
// key id is empty, a key is not an Ed25519 public key, or the issuer is
// empty.
func NewVerifier(issuer string, keys map[string]ed25519.PublicKey, opts ...Option) (*Verifier, error) {
	if issuer == "" {
		return nil, errors.New("fencetoken: NewVerifier: empty issuer")
	}
	if len(keys) == 0 {
		return nil, errors.New("fencetoken: NewVerifier: no keys")
	}
	own := make(map[string]ed25519.PublicKey, len(keys))
	for kid, k := range keys {
		switch {
		case kid == "":
			return nil, errors.New("fencetoken: NewVerifier: empty key id")
		case len(k) != ed25519.PublicKeySize:
			return nil, fmt.Errorf("fencetoken: NewVerifier: key %q: an Ed25519 public key has %d bytes, got %d", kid, ed25519.PublicKeySize, len(k))
		}
		own[kid] = append(ed25519.PublicKey(nil), k...)
	}
	v := &Verifier{
		issuer: issuer,
		keys:   own,
		parser: jwt.NewParser(jwt.WithValidMethods([]string{Alg}), jwt.WithIssuer(issuer), jwt.WithStrictDecoding()),
		cache:  proofCache{limit: DefaultCacheSize},
	}
	for _, o := range opts {
		o(v)
	}
	return v, nil
}

// Verify returns the token proof vouches for, or an error wrapping
// ErrInvalid. It ignores iat and any claim it does not know. A verified
// token says whom the coordinator granted which fence; whether that lease
// is still live is for the gate to decide, by the fence.
func (v *Verifier) Verify(proof string) (leasefence.Token, error) {
	if t, ok := v.cache.get(proof); ok {
		return t, nil
	}
	t, err := v.verify(proof)
	if err != nil {
		v.refused.Add(1)
		return leasefence.Token{}, err
	}
	v.cache.put(proof, t)
	return t, nil
}

// VerifyOne verifies the one proof a request carries, given every value it
// carries (each Fence-Token header, each fence-token metadata value): one
// is Verify's; none or several are refused with an error wrapping
// ErrInvalid and counted by Refused like any refusal, since which of two a
// proxy or a handler would read is anyone's guess, and a forger who always
// sends two must not be invisible to an alarm on Refused. A transport that
// answers a request without a proof otherwise (fencehttp's 428) does so
// before calling VerifyOne.
func (v *Verifier) VerifyOne(proofs []string) (leasefence.Token, error) {
	if len(proofs) == 1 {
		return v.Verify(proofs[0])
	}
	v.refused.Add(1)
	return leasefence.Token{}, fmt.Errorf("%w: %d proofs in one request, want exactly one", ErrInvalid, len(proofs))
}

// Refused returns how many proofs Verify and VerifyOne have refused. A rising count means
// someone presents tokens the coordinator never minted.
func (v *Verifier) Refused() uint64 { return v.refused.Load() }

func (v *Verifier) verify(proof string) (leasefence.Token, error) {
	if len(proof) > MaxProofLength {
		return leasefence.Token{}, fmt.Errorf("%w: %d bytes, more than MaxProofLength (%d)", ErrInvalid, len(proof), MaxProofLength)
	}
	if err := checkCompact(proof); err != nil {
		return leasefence.Token{}, err
	}
	var c receivedClaims
	if _, err := v.parser.ParseWithClaims(proof, &c, v.key); err != nil {
		return leasefence.Token{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	fence, err := parseFence(c.Fence)
	if err != nil {
		return leasefence.Token{}, err
	}
	switch {
	case c.Subject == "":
		return leasefence.Token{}, fmt.Errorf("%w: no sub (holder)", ErrInvalid)
	case c.Resource == "":
		return leasefence.Token{}, fmt.Errorf("%w: no %s (resource)", ErrInvalid, ClaimResource)
	}
	t := leasefence.Token{Resource: c.Resource, Holder: c.Subject, Fence: fence}
	if err := leasefence.ValidateToken(t); err != nil {
		return leasefence.Token{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return t, nil
}

// checkCompact refuses a proof that is not three base64url segments joined
// by two dots, before anything is decoded. Go's base64 decoder skips CR and
// LF even in strict mode, so without this a proof with a line break inside
// or after it would verify as the same proof: one proof must be one string.
func checkCompact(proof string) error {
	dots := 0
	for i := 0; i < len(proof); i++ {
		switch b := proof[i]; {
		case b == '.':
			dots++
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '-', b == '_':
		default:
			return fmt.Errorf("%w: malformed: byte %#02x at offset %d is not base64url or a dot", ErrInvalid, b, i)
		}
	}
	if dots != 2 {
		return fmt.Errorf("%w: malformed: %d dots, a compact JWS has 2", ErrInvalid, dots)
	}
	return nil
}

// key is the parser's key function: it sees the header before any
// signature is checked, and answers only an EdDSA proof with a known kid.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	if _, ok := t.Method.(*jwt.SigningMethodEd25519); !ok {
		return nil, fmt.Errorf("alg %v is not %s", t.Header["alg"], Alg)
	}
	kid, ok := t.Header["kid"].(string)
	if !ok || kid == "" {
		return nil, errors.New("no kid in the header")
	}
	k, ok := v.keys[kid]
	if !ok {
		return nil, fmt.Errorf("unknown kid %q", kid)
	}
	return k, nil
}

// parseFence reads lf_fence: a JSON string of decimal digits, without
// leading zeros, from 1 to the largest uint64.
func parseFence(raw json.RawMessage) (leasefence.Fence, error) {
	if len(raw) == 0 {
		return 0, fmt.Errorf("%w: no %s", ErrInvalid, ClaimFence)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%w: %s is %s, not a decimal string", ErrInvalid, ClaimFence, raw)
	}
	if s == "" || s[0] == '0' {
		return 0, fmt.Errorf("%w: %s %q is empty, 0 or has a leading zero", ErrInvalid, ClaimFence, s)
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%w: %s %q is not decimal digits", ErrInvalid, ClaimFence, s)
		}
	}
	f, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q is out of range", ErrInvalid, ClaimFence, s)
	}
	return leasefence.Fence(f), nil
}

// proofCache remembers verified proofs: a map and a ring of its keys in
// the order they were put, so the oldest is forgotten first.
type proofCache struct {
	limit int
	mu    sync.RWMutex
	byKey map[string]leasefence.Token
	order []string
	next  int
}

func (c *proofCache) get(proof string) (leasefence.Token, bool) {
	if c.limit == 0 {
		return leasefence.Token{}, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.byKey[proof]
	return t, ok
}

func (c *proofCache) put(proof string, t leasefence.Token) {
	if c.limit == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[proof]; ok {
		return // verified twice at once
	}
	if c.byKey == nil {
		c.byKey = make(map[string]leasefence.Token, c.limit)
	}
	if len(c.order) < c.limit {
		c.order = append(c.order, proof)
	} else {
		delete(c.byKey, c.order[c.next])
		c.order[c.next] = proof
		c.next = (c.next + 1) % c.limit
	}
	c.byKey[proof] = t
}
