package leasetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasefence/lab/leasefence"
)

// BadID is an id that breaks the core's id rule (leasefence.MaxIDLen), with
// the words the *leasefence.IDError for it must contain.
type BadID struct {
	Name, ID, Why string
}

// BadIDs are ids every client, coordinator and gate must refuse, as a
// holder, a resource or a request id, with a *leasefence.IDError before it
// sends or stores anything: one byte over leasefence.MaxIDLen, 1.6 MB (over
// etcd's request limit), two that are not valid UTF-8 (which PostgreSQL's
// TEXT refuses while SQLite stores it), and control characters (which a
// signed proof's JSON writes as six bytes each), in the eight-byte fast
// path and after a multi-byte rune.
func BadIDs() []BadID {
	return []BadID{
		{"MaxIDLen + 1", strings.Repeat("h", leasefence.MaxIDLen+1), "longer than MaxIDLen"},
		{"1.6 MB", strings.Repeat("h", 1600*1000), "longer than MaxIDLen"},
		{"not UTF-8", "worker-\xff\xfe", "not valid UTF-8"},
		{"a cut rune", "caf\xc3", "not valid UTF-8"},
		{"a line feed", "worker-a\nworker-b", "control character (U+000A at byte 8)"},
		{"NUL", "worker\x00", "control character (U+0000 at byte 6)"},
		{"DEL", "orders-2026\x7f", "control character (U+007F at byte 11)"},
		{"C1 after a rune", "wörker\u0085", "control character (U+0085 at byte 7)"},
	}
}

// LongestID is the longest id the rule lets through: MaxIDLen bytes, of
// two-byte runes. Every implementation must accept it end to end.
func LongestID() string { return strings.Repeat("é", leasefence.MaxIDLen/2) }

// CheckIDError fails t unless err is a *leasefence.IDError for an id of
// kind that says why (one of BadIDs' Why; "" for any), matching
// leasefence.ErrInvalidRequest, with a message that does not quote a long
// id whole. what names the call, for the message.
func CheckIDError(t testing.TB, what string, err error, kind leasefence.IDKind, why string) {
	t.Helper()
	var ide *leasefence.IDError
	if !errors.As(err, &ide) || !errors.Is(err, leasefence.ErrInvalidRequest) {
		t.Errorf("%s = %.200v, want a *leasefence.IDError for the %s", what, err, kind)
		return
	}
	if ide.Kind != kind || !strings.Contains(ide.Why, why) || !strings.Contains(err.Error(), why) {
		t.Errorf("%s = %v (%+v), want the %s's id to be %q", what, err, ide, kind, why)
	}
	if len(err.Error()) > 300 {
		t.Errorf("%s: the message quotes the whole id: %d bytes", what, len(err.Error()))
	}
}
