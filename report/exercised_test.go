package report

import (
	"bytes"
	"encoding/json"
	"html"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// A run that exercised nothing the fenced mode promises is never said to
// have held: overlap with stalls of 1-2ms and releases has no overlap, no
// expiry, no refusal and no takeover. The text, the JSON and the page say
// what was not exercised, and the verdict is inconclusive; the built-in
// overlap, which exercises all of it, still holds.
func TestVerdictOnARunThatExercisedNothing(t *testing.T) {
	quiet := func(sc *spec.Scenario) {
		sc.Agent.Stall = spec.Uniform(time.Millisecond, 2*time.Millisecond)
		sc.Agent.Release = true
	}
	for _, tc := range []struct {
		name   string
		change func(*spec.Scenario)
		want   string
	}{
		{"stalls inside the TTL, released", quiet, VerdictInconclusive},
		{"overlap as built", nil, VerdictHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, res := renderPage(t, "overlap", tc.change)
			f := res.Modes[history.Fenced]
			if got := Verdict(res); got != tc.want || ModeVerdict(f) != tc.want {
				t.Fatalf("verdict %s, fenced %s, want %s (not exercised: %q)", got, ModeVerdict(f), tc.want, f.NotExercised)
			}
			var text bytes.Buffer
			Text(&text, &history.Header{}, res, Stop{}, Runner{})
			var js bytes.Buffer
			if err := JSON(&js, res, Stop{}, Runner{}); err != nil {
				t.Fatal(err)
			}
			var got struct {
				Verdict string
				Modes   map[string]struct {
					Verdict      string
					NotExercised []string `json:"not_exercised"`
					Findings     struct {
						Lock, Writes, Coverage struct {
							Verdict, Reason string
							Counts          map[string]int
						}
					}
				}
			}
			if err := json.Unmarshal(js.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			// The three findings, as the checker made them, in the JSON
			// and on the page: the lock held only if a takeover tested it.
			jf := got.Modes["fenced"].Findings
			if jf.Lock.Verdict != f.Findings.Lock.Verdict || jf.Coverage.Counts["takeovers"] != f.Takeovers ||
				(jf.Lock.Verdict == history.FindingHeld) != (f.Takeovers > 0) {
				t.Errorf("the JSON's findings %+v, the checker's %+v", jf, f.Findings)
			}
			if !strings.Contains(string(page), `id="findings"`) || !strings.Contains(string(page), html.EscapeString(f.Findings.Lock.Reason)) {
				t.Errorf("the page lacks the findings table or the lock finding %q", f.Findings.Lock.Reason)
			}
			held := strings.Contains(text.String(), "held its invariants")
			if tc.want == VerdictHeld {
				if !held || len(f.NotExercised) != 0 || f.Takeovers == 0 {
					t.Errorf("a run that exercised everything: takeovers %d, not exercised %q\n%s", f.Takeovers, f.NotExercised, text.String())
				}
				return
			}
			if f.Overlaps+f.Expiries+f.CommitsRefused+f.Takeovers != 0 || f.CommitsAdmitted == 0 {
				t.Fatalf("the quiet run exercised something: %+v", f)
			}
			for _, ne := range []string{history.NotExercisedExclusion, history.NotExercisedGate, history.NotExercisedContainment} {
				if !slices.Contains(f.NotExercised, ne) || !slices.Contains(got.Modes["fenced"].NotExercised, ne) {
					t.Errorf("not exercised %q, want %q among them", f.NotExercised, ne)
				}
			}
			flat := strings.Join(strings.Fields(text.String()), " ")
			if held || !strings.Contains(flat, "verdict: INCONCLUSIVE") || !strings.Contains(flat, "Not exercised: mutual exclusion") {
				t.Errorf("the text report:\n%s", text.String())
			}
			if got.Verdict != VerdictInconclusive || got.Modes["fenced"].Verdict != VerdictInconclusive {
				t.Errorf("the JSON: %s", js.String())
			}
			if p := string(page); strings.Contains(p, "held its invariants") || !strings.Contains(p, "INCONCLUSIVE") {
				t.Errorf("the page says held, or not what was not exercised")
			}
		})
	}
}
