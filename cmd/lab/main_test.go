package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/internal/peakrss"
	"github.com/leasefence/lab/procdriver"
	"github.com/leasefence/lab/realtime/etcdcluster"
)

var update = flag.Bool("update", false, "rewrite the golden files: the cmp targets of testdata/script")

func TestMain(m *testing.M) {
	peakrss.ServeIfAsked() // the fresh process between a test and the lab it measures
	if os.Getenv(runAsLab) == "1" {
		os.Exit(Main()) // a child that is lab itself: see labChild
	}
	etcdcluster.ServeMemberIfAsked()
	procdriver.RunIfChild() // an agent of a run with --agents-as process
	testscript.Main(m, map[string]func(){
		"lab": func() { os.Exit(Main()) },
		// lab-broken-fence is lab with the fenced mode made to break an
		// invariant after every run: the only way to see exit status 1 and
		// the bug report, because a correct library never breaks one.
		"lab-broken-fence": func() {
			a := newApp()
			a.afterRun = breakFencedMode
			os.Exit(a.main(context.Background(), os.Args[1:]))
		},
	})
}

// breakFencedMode makes a result look as if a stale write had landed
// through the gate.
func breakFencedMode(res *history.Result) {
	if f, ok := res.Modes[history.Fenced]; ok {
		f.StaleWritesLanded++
		f.Violations = append(f.Violations, history.Plural(f.StaleWritesLanded, "stale write", "stale writes")+" landed through the gate")
	}
}

func TestScripts(t *testing.T) {
	fixtures, err := filepath.Abs("../../fixtures")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("FIXTURES", fixtures)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":     cmdExits,
			"jsonfield": cmdJSONField,
		},
	})
}

// cmdExits is "exits N prog args...": run prog and require exit status N
// (stdout and stderr are kept for the commands after it, as exec does).
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N prog [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: %q is not a status", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exits: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// cmdJSONField is "jsonfield PATH VALUE": the JSON on the last command's
// stdout has VALUE (as JSON text) at the dotted PATH; VALUE "*" only
// requires the field to exist.
func cmdJSONField(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: jsonfield PATH VALUE")
	}
	var doc any
	if err := json.Unmarshal([]byte(ts.ReadFile("stdout")), &doc); err != nil {
		ts.Fatalf("stdout is not JSON: %v", err)
	}
	v := doc
	for _, key := range strings.Split(args[0], ".") {
		m, ok := v.(map[string]any)
		if !ok {
			ts.Fatalf("%s: %q is not in an object", args[0], key)
		}
		if v, ok = m[key]; !ok {
			if neg {
				return
			}
			ts.Fatalf("%s: no field %q", args[0], key)
		}
	}
	if args[1] == "*" {
		if neg {
			ts.Fatalf("%s exists", args[0])
		}
		return
	}
	got, _ := json.Marshal(v)
	if (string(got) == args[1]) == neg {
		ts.Fatalf("%s = %s, want %s%s", args[0], got, map[bool]string{true: "not "}[neg], args[1])
	}
}

// The history file's format is documented with every kind, here as in
// package history.
func TestDocListsEveryEventKind(t *testing.T) {
	for _, file := range []string{"doc.go", "../../history/doc.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range history.Kinds() {
			if !regexp.MustCompile(`(?m)^//\t` + k.String() + ` +\S`).Match(src) {
				t.Errorf("%s does not document the event kind %s", file, k)
			}
		}
	}
}
