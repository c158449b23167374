package readmetest

import (
	"flag"
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
	for _, name := range []string{"ExampleLock", "Example_hold"} {
		if _, err := exampleText(root+"/leasefence/etcdlease", name, false); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := exampleText(root+"/leasefence/etcdlease", "ExampleNoSuch", false); err == nil {
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
