package history

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Printable returns s with every control character written out as an
// escape (\x1b, \n, \u009b, and \xff for a byte that is not UTF-8), so
// that a text drawn from a file (a scenario's name or description, a
// history's names and details) cannot drive the terminal that shows it.
func Printable(s string) string {
	if !strings.ContainsFunc(s, isControl) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	writePrintable(&b, s, "")
	return b.String()
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// writePrintable writes s escaped, but for the control characters in keep.
func writePrintable(b *strings.Builder, s, keep string) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(b, `\x%02x`, s[i])
		case isControl(r) && !strings.ContainsRune(keep, r):
			if r < 0x80 {
				fmt.Fprintf(b, `\x%02x`, r)
			} else {
				fmt.Fprintf(b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
}

// PrintableWriter returns a writer that passes what it is given to w with
// every control character but line feed, tab and carriage return escaped
// as Printable does: for the text a command prints, whatever a file put
// in it. A writer of text keeps its line breaks, its tabs and a progress
// line's return; an escape sequence from a file reaches the terminal as
// text. Each Write is escaped on its own, so a character split between two
// writes is escaped byte by byte.
func PrintableWriter(w io.Writer) io.Writer {
	if p, ok := w.(printableWriter); ok {
		return p
	}
	return printableWriter{w}
}

type printableWriter struct{ w io.Writer }

func (p printableWriter) Write(b []byte) (int, error) {
	s := string(b)
	if !strings.ContainsFunc(s, isControl) && utf8.ValidString(s) || onlyKept(s) {
		return p.w.Write(b)
	}
	var sb strings.Builder
	writePrintable(&sb, s, "\n\t\r")
	if _, err := io.WriteString(p.w, sb.String()); err != nil {
		return 0, err
	}
	return len(b), nil
}

// onlyKept reports whether s is valid UTF-8 whose only control characters
// are those a printable writer keeps.
func onlyKept(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return isControl(r) && r != '\n' && r != '\t' && r != '\r' })
}
