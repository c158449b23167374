package readmetest

import (
	"bytes"
	"flag"
	"fmt"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the programs and outputs in the README and docs/*.md from their Examples")

func TestFind(t *testing.T) {
	doc := "intro\n<!-- capture x: go test -->\n```\nline 1\nline 2\n```\nafter\n"
	start, end, err := find([]byte(doc), "x")
	if err != nil {
		t.Fatal(err)
	}
	if got := doc[start:end]; got != "line 1\nline 2\n" {
		t.Errorf("block %q", got)
	}
	for _, bad := range []string{"no marker\n", "<!-- capture x: y -->\nno block\n", "<!-- capture x: y -->\n```\nnever closed\n"} {
		if _, _, err := find([]byte(bad), "x"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestValueRE(t *testing.T) {
	m := valueRE.FindAllStringSubmatch("(`overlap`: <!-- value a.b -->24<!-- /value --> refused, <!-- value c -->38<!-- /value -->)", -1)
	if len(m) != 2 || m[0][1] != "a.b" || m[0][2] != "24" || m[1][1] != "c" || m[1][2] != "38" {
		t.Errorf("matches %q", m)
	}
}

// TestPrograms: every program of the README and the guides is the one
// go/doc makes of the Example it names, with that Example's output.
func TestPrograms(t *testing.T) {
	Programs(t, *update)
}

func TestExampleTextFindsNamedExamples(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Example_lock", "Example_hold"} {
		if _, err := exampleText(root+"/leasefence/tests/etcdlease", name, false); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := exampleText(root+"/leasefence/tests/etcdlease", "ExampleNoSuch", false); err == nil {
		t.Error("a missing Example gave no error")
	}
}

// TestLinks: every relative link of the README and the guides reaches a
// file and, with a fragment, a heading.
func TestLinks(t *testing.T) {
	Links(t)
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Reading a report":                       "reading-a-report",
		"A real network, and forgers":            "a-real-network-and-forgers",
		"Reading a report: `lab run gap`":        "reading-a-report-lab-run-gap",
		"Agents as processes, paused by SIGSTOP": "agents-as-processes-paused-by-sigstop",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// maxReadmeLines is how long the README may grow: a front door that fits
// a few screens, the rest in docs/ and the packages' documentation.
const maxReadmeLines = 300

// TestReadmeFits keeps the README at most maxReadmeLines long.
func TestReadmeFits(t *testing.T) {
	docs, err := Docs()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.Rel != "README.md" {
			continue
		}
		if n := bytes.Count(d.Text, []byte("\n")); n > maxReadmeLines {
			t.Errorf("README.md is %d lines, more than %d: move a section to docs/ and link it from the map", n, maxReadmeLines)
		}
		return
	}
	t.Fatal("no README.md among the docs")
}

// TestFragmentMustBeConsecutiveLinesOfTheExample: a fragment passes only
// as a run of its Example's lines, so an edited, reordered or invented
// line fails.
func TestFragmentMustBeConsecutiveLinesOfTheExample(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := root + "/leasefence/leaseotel"
	const marker = "<!-- fragment leasefence/leaseotel Example_service -->"
	good := "gate := leasefence.NewFenceGate(\"deploy-slot\", leasefence.WithGateTrace(hooks.Gate))\n" +
		"svc := leaseotel.NewService(leasefence.Local(coord), leaseotel.WithTracerProvider(tp)) // each call a span in the caller's trace\n"
	lines := strings.SplitAfter(good, "\n")
	for name, tc := range map[string]struct {
		block string
		ok    bool
	}{
		"a run of the body":  {good, true},
		"reordered":          {lines[1] + lines[0], false},
		"a changed argument": {strings.Replace(good, "deploy-slot", "other-slot", 1), false},
		"a line not in it":   {"fmt.Println(\"hello\")\n", false},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{TB: t}
			d := &Doc{Rel: "test.md", Text: []byte(marker + "\n```go\n" + tc.block + "```\n")}
			checkFragment(rec, d, 0, marker, dir, "Example_service")
			if rec.failed == tc.ok {
				t.Errorf("checkFragment on %q: failed %v, want %v (%s)", tc.block, rec.failed, !tc.ok, rec.msg)
			}
		})
	}
}

// TestRepeatedMarkersCheckTheirOwnBlocks checks that a marker written twice
// (one Example shown in two fragments, with prose between) checks each
// block after itself: a wrong second block fails though the first is right.
func TestRepeatedMarkersCheckTheirOwnBlocks(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- fragment leasefence/leaseotel Example_service -->"
	good := "gate := leasefence.NewFenceGate(\"deploy-slot\", leasefence.WithGateTrace(hooks.Gate))\n"
	for name, tc := range map[string]struct {
		second string
		ok     bool
	}{
		"both in the body":     {good, true},
		"the second not in it": {"fmt.Println(\"hello\")\n", false},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{TB: t}
			d := &Doc{Rel: "test.md", Text: []byte(marker + "\n```go\n" + good + "```\n\nThen:\n\n" + marker + "\n```go\n" + tc.second + "```\n")}
			if checkMarkers(rec, d, root, false) {
				t.Errorf("checkMarkers rewrote a doc without update")
			}
			if rec.failed == tc.ok {
				t.Errorf("second block %q: failed %v, want %v (%s)", tc.second, rec.failed, !tc.ok, rec.msg)
			}
		})
	}
}

// recorder is a testing.TB that keeps an error instead of failing.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

func (r *recorder) Helper() {}
