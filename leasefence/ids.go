package leasefence

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxIDLen is the longest holder, resource or request id, in bytes, that a
// client, a coordinator or a gate accepts; every id must also be non-empty,
// valid UTF-8 and free of control characters (U+0000 to U+001F, U+007F to
// U+009F). The rule lives here, and every implementation (the in-memory
// ones, and those of packages etcdlease, redislease and sqlgate) applies it
// before it sends or stores anything, with the same error (*IDError); a
// signer of proofs (fencetoken) reads it too, and every id pair it allows
// fits a proof.
//
// Why 1 KiB. An id is a name, not data: host names (at most 253 bytes),
// Kubernetes object names (253), UUIDs (36) and the client's own request ids
// (under 64) fit with room to spare. The stores bound it from above:
//
//   - etcd keeps resources and request ids in keys, and every key in the
//     memory of every member's index; a request (a gate's transaction, with
//     the caller's operations and a refusal naming two holders) must fit
//     --max-request-bytes, 1.5 MiB by default. A 1 KiB id costs the index
//     little and leaves the request limit to the caller's operations.
//   - PostgreSQL indexes the resource in a B-tree primary key, whose entries
//     must fit a third of an 8 KiB page (2,704 bytes); a longer one fails
//     the insert. Its TEXT columns take only valid UTF-8 in a UTF8
//     database (SQLSTATE 22021 otherwise), while SQLite stores any bytes:
//     checking UTF-8 up front makes every gate answer alike.
//   - Redis keys may reach 512 MB, so Redis does not bound it; MySQL's
//     InnoDB index limit (3,072 bytes) would not either.
//
// Every id is also written to every history line, trace attribute and log
// line that names it: a bound keeps those readable.
//
// Why no control characters. A name has none (a host name, a Kubernetes
// name, a UUID), and without them an id shows as itself on one line of a
// log, a history or a terminal. And a signed proof carries both ids in
// JSON, which must write each of U+0000 to U+001F as six bytes: without
// them, and written without HTML escaping (as fencetoken writes them), no
// byte of an id takes more than two bytes there ('"' and '\' are escaped;
// U+2028 and U+2029 take six bytes for three), so the proof of any two
// valid ids has a bound that an HTTP header or gRPC metadata can carry
// (fencetoken.MaxProofLength).
const MaxIDLen = 1024

// IDKind names what an id identifies, in an IDError.
type IDKind string

// The ids the rule applies to.
const (
	IDHolder    IDKind = "holder"
	IDResource  IDKind = "resource"
	IDRequestID IDKind = "request id"
)

// IDError is an id that breaks the rule of MaxIDLen: empty, longer than
// MaxIDLen bytes, not valid UTF-8, or with a control character. It matches
// ErrInvalidRequest, and is returned before anything is sent or stored.
type IDError struct {
	Kind IDKind
	Len  int    // the id's length in bytes
	Why  string // "is empty", "is longer than MaxIDLen (1024 bytes)", "is not valid UTF-8" or "has a control character (U+000A at byte 6)"
	head string // the id's first bytes, for the message
}

func (e *IDError) Error() string {
	if e.Len == 0 {
		return fmt.Sprintf("%v: %s %s", ErrInvalidRequest, e.Kind, e.Why)
	}
	tail := ""
	if e.Len > len(e.head) {
		tail = "..."
	}
	return fmt.Sprintf("%v: %s %q%s (%d bytes) %s", ErrInvalidRequest, e.Kind, e.head, tail, e.Len, e.Why)
}

// Is reports whether target is ErrInvalidRequest.
func (e *IDError) Is(target error) bool { return target == ErrInvalidRequest }

// ValidateID returns nil if id is a valid id of kind (non-empty, at most
// MaxIDLen bytes, valid UTF-8 without control characters), and an *IDError
// saying why not otherwise.
func ValidateID(kind IDKind, id string) error {
	if idOK(id) {
		return nil
	}
	return invalidID(kind, id)
}

// ValidateToken returns nil for a token a coordinator could have issued:
// valid resource and holder ids (ValidateID) and a fence above 0 (fence 0
// is never minted: fences start after StartFence >= 0). Otherwise the error
// matches ErrInvalidRequest: an *IDError for the resource or the holder.
func ValidateToken(t Token) error { return validateToken(t) }

// validateToken is ValidateToken, small enough to inline on a gate's path:
// the explanation is left to invalidToken.
func validateToken(t Token) error {
	if t.Fence != 0 && idOK(t.Resource) && idOK(t.Holder) {
		return nil
	}
	return invalidToken(t)
}

// idOK is the rule of MaxIDLen. len(id)-1 as a uint wraps for the empty
// id, so one comparison bounds both ends.
func idOK(id string) bool { return uint(len(id)-1) < MaxIDLen && plainText(id) }

// Eight bytes at a time: the high bit of each, and each byte's value
// repeated.
const (
	highBits = 0x8080808080808080
	ones     = 0x0101010101010101
)

// plainText reports whether s is valid UTF-8 without control characters,
// with a faster path for the ASCII ids nearly every caller has: eight bytes
// at a time (the compiler makes the eight byte reads one load), and the
// full decoder only from the first chunk with a high bit set. It is on
// every Commit of the in-memory gate, where utf8.ValidString alone measured
// about 5x the cost of the rest of the token check.
func plainText(s string) bool {
	for len(s) >= 8 {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		if w&highBits != 0 {
			return plainRunes(s)
		}
		// With no high bit set, subtracting 0x20 from every byte borrows
		// (and sets a high bit) only from a byte below 0x20; and del has a
		// zero byte, which subtracting 1 turns to 0xff, only where w has
		// DEL (0x7f).
		del := w ^ 0x7f*ones
		if (w-0x20*ones)&highBits != 0 || (del-ones)&^del&highBits != 0 {
			return false
		}
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return plainRunes(s[i:])
		}
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// plainRunes is plainText, rune by rune.
func plainRunes(s string) bool {
	_, bad := firstControl(s)
	return !bad && utf8.ValidString(s)
}

// firstControl returns the first control character of s and its offset,
// and whether there is one.
func firstControl(s string) (at int, found bool) {
	for i, r := range s {
		if unicode.IsControl(r) {
			return i, true
		}
	}
	return 0, false
}

func invalidID(kind IDKind, id string) error {
	e := &IDError{Kind: kind, Len: len(id)}
	switch {
	case id == "":
		e.Why = "is empty"
	case len(id) > MaxIDLen:
		e.Why = fmt.Sprintf("is longer than MaxIDLen (%d bytes)", MaxIDLen)
	case !utf8.ValidString(id):
		e.Why = "is not valid UTF-8"
	default:
		at, _ := firstControl(id)
		r, _ := utf8.DecodeRuneInString(id[at:])
		e.Why = fmt.Sprintf("has a control character (%U at byte %d)", r, at)
	}
	e.head = id[:min(len(id), 40)]
	return e
}

// invalidToken explains what is wrong with t.
func invalidToken(t Token) error {
	if err := ValidateID(IDResource, t.Resource); err != nil {
		return err
	}
	if err := ValidateID(IDHolder, t.Holder); err != nil {
		return err
	}
	if t.Fence == 0 {
		return fmt.Errorf("%w: token %v has fence 0, which is never issued", ErrInvalidRequest, t)
	}
	return nil
}

// ValidateAcquire returns nil for an acquire request whose request id,
// holder and resource are valid ids (ValidateID), and the *IDError of the
// first that is not otherwise. Every coordinator applies it before it
// sends or changes anything.
func ValidateAcquire(req AcquireRequest) error {
	if idOK(req.RequestID) && idOK(req.Holder) && idOK(req.Resource) {
		return nil
	}
	for _, id := range []struct {
		kind IDKind
		id   string
	}{{IDRequestID, req.RequestID}, {IDHolder, req.Holder}, {IDResource, req.Resource}} {
		if err := ValidateID(id.kind, id.id); err != nil {
			return err
		}
	}
	return nil
}

// ValidateRenew returns nil for a renew request with a valid request id and
// token (ValidateID, ValidateToken), and why not otherwise.
func ValidateRenew(req RenewRequest) error {
	if err := ValidateID(IDRequestID, req.RequestID); err != nil {
		return err
	}
	return validateToken(req.Token)
}
