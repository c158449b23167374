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
// etcd's request limit), and two that are not valid UTF-8 (which
// PostgreSQL's TEXT refuses while SQLite stores it).
func BadIDs() []BadID {
	return []BadID{
		{"MaxIDLen + 1", strings.Repeat("h", leasefence.MaxIDLen+1), "longer than MaxIDLen"},
		{"1.6 MB", strings.Repeat("h", 1600*1000), "longer than MaxIDLen"},
		{"not UTF-8", "worker-\xff\xfe", "not valid UTF-8"},
		{"a cut rune", "caf\xc3", "not valid UTF-8"},
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
