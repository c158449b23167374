package history

import (
	"testing"
	"time"
)

func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0ms"},
		{400 * time.Nanosecond, "1µs"},
		{250 * time.Microsecond, "250µs"},
		{999_600 * time.Nanosecond, "1ms"},
		{time.Millisecond, "1ms"},
		{950 * time.Millisecond, "950ms"},
		{999_600 * time.Microsecond, "1.000s"},
		{time.Second, "1.000s"},
		{1066247620 * time.Nanosecond, "1.066s"},
		{14583674314 * time.Nanosecond, "14.584s"},
		{41818 * time.Millisecond, "41.818s"},
		{time.Minute, "60.000s"},
		{-200 * time.Millisecond, "-200ms"},
		{-1500 * time.Millisecond, "-1.500s"},
	} {
		if got := FormatDuration(tc.d); got != tc.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	if got := FormatMS(1066.24762); got != "1.066s" {
		t.Errorf("FormatMS(1066.24762) = %q, want 1.066s", got)
	}
	if got := FormatMS(41542.1); got != "41.542s" {
		t.Errorf("FormatMS(41542.1) = %q, want 41.542s", got)
	}
}

// Every output parses back with time.ParseDuration, so a duration copied
// from a report into a fixture means what it said.
func TestFormatDurationParses(t *testing.T) {
	for _, d := range []time.Duration{0, 3 * time.Microsecond, 7 * time.Millisecond, 950 * time.Millisecond, 1400 * time.Millisecond, 61 * time.Second, -30 * time.Millisecond} {
		s := FormatDuration(d)
		back, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("FormatDuration(%v) = %q does not parse: %v", d, s, err)
		}
		if back != d {
			t.Errorf("FormatDuration(%v) = %q parses as %v", d, s, back)
		}
	}
}

func TestPlural(t *testing.T) {
	for n, want := range []string{"0 writes", "1 write", "2 writes"} {
		if got := Plural(n, "write", "writes"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
	if got := Plural(uint64(1), "event", "events"); got != "1 event" {
		t.Errorf("Plural(uint64(1)) = %q", got)
	}
}

// Every violation the checker names agrees with its count, at 1 and 2 (a
// violation is only named when its count is above 0).
func TestViolationsAgree(t *testing.T) {
	c := &Checker{h: &Header{Clocks: Clocks{WithinBudget: true}}}
	want := map[int][]string{
		1: {"1 stale write landed through the gate", "1 containment breach with drift inside the skew budget",
			"1 fence reused with no restart that lost the counter between the two mints", "1 refusal whose floor the history does not bear out",
			"1 write reported refused landed", "1 commit admitted below a fence pushed to the gate"},
		2: {"2 stale writes landed through the gate", "2 containment breaches with drift inside the skew budget",
			"2 fences reused with no restart that lost the counter between the two mints", "2 refusals whose floor the history does not bear out",
			"2 writes reported refused landed", "2 commits admitted below a fence pushed to the gate"},
	}
	for n := range 3 {
		var got []string
		for _, v := range c.violations(&Report{StaleWritesLanded: n, ContainmentBreaches: n, FenceReuses: n, UnexcusedFenceReuses: n, UnexplainedRefusals: n,
			RefusedWritesLanded: n, AdmittedBelowPush: n}) {
			got = append(got, v.text)
		}
		if len(got) != len(want[n]) {
			t.Fatalf("at %d: %q, want %q", n, got, want[n])
		}
		for i := range got {
			if got[i] != want[n][i] {
				t.Errorf("at %d: %q, want %q", n, got[i], want[n][i])
			}
		}
	}
}
