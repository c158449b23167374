package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasefence/lab/report"
)

// lab check exits 1 on every hand-made history whose claims do not bear
// each other out (and on one that tests nothing), and 0 on those that
// hold.
func TestCheckExitsOnHandMadeHistories(t *testing.T) {
	// These hold; the rest break a rule, or (containment_beyond_budget,
	// fence_reuse_after_lost_restart, vacuous: no write at all) test
	// nothing.
	held := map[string]bool{"refused_overlap": true, "naive_stale_write": true, "reissued_fence_sole_holder": true,
		"stale_across_restart": true, "forgeries_naive": true, "fences_reply_order_across_resources": true,
		"lapsed_writes": true, "lease_refused_after_end": true, "lease_refused_after_send_bound": true,
		"lease_refused_after_retried_acquire": true, "lapsed_writes_lock_deadline": true}
	files, err := filepath.Glob("../../history/testdata/*.jsonl")
	if err != nil || len(files) < 20 {
		t.Fatalf("%d histories (%v)", len(files), err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runLab("check", f)
			want := exitFailed
			if held[name] {
				want = exitOK
			}
			if code != want {
				t.Errorf("lab check %s: exit %d, want %d\n%s%s", name, code, want, stdout, stderr)
			}
			if name == "vacuous" && (!strings.Contains(stdout, "VERDICT: VACUOUS") || !strings.Contains(stdout, "vacuous\n") ||
				!strings.Contains(stderr, "vacuous")) {
				t.Errorf("a history with no write:\n%s%s", stdout, stderr)
			}
		})
	}
}

// A history someone handed you cannot drive your terminal: the control
// characters of its names, description and details are printed escaped,
// on stdout and stderr alike.
func TestCheckEscapesControlCharacters(t *testing.T) {
	const clear = `\u001b[2J`
	path := filepath.Join(t.TempDir(), "evil.jsonl")
	hist := `{"kind":"run","format":2,"scenario":"evil` + clear + `","description":"clears` + clear + `the screen","seed":1,"backend":"hand","modes":["fenced"],"duration_ns":3000000000,"agents":["agent` + clear + `"],"resources":["res` + clear + `"],"ttl_ns":1000000000,"clock_skew_ns":0,"clocks":{"within_budget":true}}
{"at_ns":0,"mode":"fenced","kind":"granted","agent":"agent` + clear + `","resource":"res` + clear + `","fence":1,"deadline_ns":1000000000}
{"at_ns":0,"mode":"fenced","kind":"acquired","agent":"agent` + clear + `","resource":"res` + clear + `","fence":1,"deadline_ns":1000000000}
{"at_ns":5,"mode":"fenced","kind":"commit_admitted","agent":"agent` + clear + `","resource":"res` + clear + `","fence":1}
{"at_ns":9,"mode":"fenced","kind":"library_error","agent":"","resource":"","fence":0,"detail":"Commit` + clear + `failed"}
`
	if err := os.WriteFile(path, []byte(hist), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runLab("check", path)
	if code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	for name, out := range map[string]string{"stdout": stdout, "stderr": stderr} {
		if strings.ContainsRune(out, 0x1b) {
			t.Errorf("%s holds a raw escape:\n%q", name, out)
		}
	}
	for _, want := range []string{`evil\x1b[2J`, `clears\x1b[2Jthe screen`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, `Commit\x1b[2Jfailed`) {
		t.Errorf("stderr lacks the escaped detail:\n%s", stderr)
	}
}

// A run that can neither finish nor fit is refused before it starts, with
// its estimate and the flag that allows it; the built-in runs are not.
func TestRunRefusesTooMuchWork(t *testing.T) {
	code, stdout, stderr := runLab("run", "crowd", "--agents", "100000", "--resources", "100000", "--duration", "24h")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "about 2.01e+11 events a mode (100000 agents for 24h0m0s), above the bound of 20000000") ||
		!strings.Contains(stderr, "--max-events=0 (no bound)") {
		t.Errorf("exit %d, stdout %q, stderr\n%s", code, stdout, stderr)
	}
	if code, _, stderr := runLab("run", "crowd", "--duration", "5s", "--max-events", "10", "--json"); code != exitUsage || !strings.Contains(stderr, "above the bound of 10;") {
		t.Errorf("a bound of 10: exit %d, stderr\n%s", code, stderr)
	}
	if code, _, stderr := runLab("run", "crowd", "--duration", "5s", "--json"); code != exitOK {
		t.Errorf("the crowd for 5s: exit %d, stderr\n%s", code, stderr)
	}
}

// A history in which the lock under test granted a resource twice is a
// failure of the lock, whatever its discipline and however well its gate
// kept the writes in order: lab check exits 1 and no form of its report
// says the lock held.
func TestCheckFailsALockThatGrantedTwice(t *testing.T) {
	const path = "../../history/testdata/lock_grants_twice.jsonl"
	page := filepath.Join(t.TempDir(), "page.html")
	code, stdout, stderr := runLab("check", path, "--html", page)
	if code != exitFailed || strings.Contains(stdout, "held its invariants") ||
		!strings.Contains(strings.Join(strings.Fields(stdout), " "), "VERDICT for lock (example.com/twicelock.Lock, fenced): BROKE ITS INVARIANTS: 1 mutual-exclusion violation") {
		t.Errorf("lab check: exit %d, want %d, and a broken verdict:\n%s%s", code, exitFailed, stdout, stderr)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if html := string(b); strings.Contains(html, "held its invariants") || !strings.Contains(html, `class="verdict failed"`) {
		t.Errorf("the page does not fail the lock:\n%s", html)
	}
	code, stdout, _ = runLab("check", path, "--json")
	var got struct {
		Verdict string
		Modes   map[string]struct {
			Verdict    string
			Violations []string
		}
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	if lock := got.Modes["lock"]; code != exitFailed || got.Verdict != report.VerdictBroken || lock.Verdict != report.VerdictBroken || len(lock.Violations) != 1 {
		t.Errorf("lab check --json: exit %d, %+v", code, got)
	}
}
