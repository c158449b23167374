package redislease

import (
	"testing"

	"github.com/leasefence/lab/leasefence"
)

// FuzzReplyReader feeds the reply reader script replies of any shape: it
// never panics, and a fence it returns without an error is one this package
// could have issued.
func FuzzReplyReader(f *testing.F) {
	f.Add("granted", "5", int64(7), true)
	f.Add("replay", "-1", int64(0), false)
	f.Add("", "9007199254740992", int64(9007199254740991), true)
	f.Fuzz(func(t *testing.T, status, field string, n int64, asInt bool) {
		vals := []any{status, field}
		if asInt {
			vals = append(vals, n)
		}
		r := reply(vals)
		_ = r.str(0)
		f1, f2 := r.fence(1), r.fence(2)
		_ = r.int(7)
		if r.err == nil {
			t.Fatal("reading a field past the reply's end was not an error")
		}
		for _, f := range []leasefence.Fence{f1, f2} {
			if f > MaxFence {
				t.Fatalf("fence %d above MaxFence", f)
			}
		}
		if err := r.unexpected("test"); err == nil {
			t.Fatal("unexpected() with a failed read returned nil")
		}
	})
}

func TestParseSeq(t *testing.T) {
	for id, want := range map[string]uint64{"1-0": 1, "42-0": 42, "18446744073709551615-0": 1<<64 - 1} {
		if got, err := parseSeq(id); err != nil || got != want {
			t.Errorf("parseSeq(%q) = %d, %v; want %d", id, got, err, want)
		}
	}
	for _, id := range []string{"", "-0", "x-0", "18446744073709551616-0"} {
		if _, err := parseSeq(id); err == nil {
			t.Errorf("parseSeq(%q) succeeded", id)
		}
	}
}
