package history

import (
	"bytes"
	"testing"
)

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"agent-1", "agent-1"},
		{"clear\x1b[2Jscreen", `clear\x1b[2Jscreen`},
		{"bell\a and\nline", `bell\x07 and\x0aline`},
		{"csi\u009b2J", `csi\u009b2J`},
		{"bad\xffbyte", `bad\xffbyte`},
		{"naïve ✓", "naïve ✓"},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var b bytes.Buffer
	w := PrintableWriter(&b)
	if n, err := w.Write([]byte("a\x1b[2J\tb\r\nc")); n != 10 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if got := b.String(); got != "a\\x1b[2J\tb\r\nc" {
		t.Errorf("PrintableWriter wrote %q", got)
	}
}
