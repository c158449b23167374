package history

import (
	"fmt"
	"strconv"
	"time"
)

// FormatDuration writes a span or a virtual instant the one way every
// report, page and dashboard of the lab shows it, rounded to what a reader
// of a run needs: whole milliseconds below a second ("950ms", "0ms"),
// seconds to the millisecond from one second up ("1.066s", "14.584s",
// "60.000s"), and microseconds only when a nonzero span is under a
// millisecond ("250µs"), so that it does not read as nothing. Seconds keep
// their three decimals so that a right-aligned column of them lines up.
func FormatDuration(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	switch {
	case d >= time.Second:
		ms := d.Round(time.Millisecond)
		return sign + strconv.FormatInt(int64(ms/time.Second), 10) + "." + pad3(int64(ms%time.Second/time.Millisecond)) + "s"
	case d >= time.Millisecond || d == 0:
		ms := d.Round(time.Millisecond)
		if ms == time.Second {
			return sign + "1.000s"
		}
		return sign + strconv.FormatInt(int64(ms/time.Millisecond), 10) + "ms"
	case d.Round(time.Microsecond) >= time.Millisecond:
		return sign + "1ms"
	default:
		return sign + strconv.FormatInt(int64(max(d.Round(time.Microsecond), time.Microsecond)/time.Microsecond), 10) + "µs"
	}
}

// FormatMS is FormatDuration of a count of milliseconds, as the report's
// JSON carries instants.
func FormatMS(ms float64) string {
	return FormatDuration(time.Duration(ms * float64(time.Millisecond)))
}

func pad3(n int64) string {
	s := strconv.FormatInt(n, 10)
	for len(s) < 3 {
		s = "0" + s
	}
	return s
}

// Plural writes a count with its noun in agreement: Plural(1, "write",
// "writes") is "1 write", Plural(0, ...) and Plural(2, ...) "0 writes" and
// "2 writes". Every message of the lab that prints a count goes through it.
func Plural[N count](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprint(n) + " " + many
}

// count is any integer a message may count with.
type count interface {
	~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64
}
