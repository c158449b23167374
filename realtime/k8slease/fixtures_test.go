package k8slease_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/leasefence/lab/fixtures"
	"github.com/leasefence/lab/procdriver"
	"github.com/leasefence/lab/scenario"
)

// TestMain lets this test binary be an agent process too: a fixture whose
// agents run as processes re-executes it as each agent, which opens the
// elector in its own process.
func TestMain(m *testing.M) {
	procdriver.RunIfChild()
	os.Exit(m.Run())
}

// TestFixtures runs the fixtures of testdata, as lab fixtures does.
func TestFixtures(t *testing.T) {
	if testing.Short() {
		t.Skip("the fixtures run in real time; not in -short")
	}
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixture files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			fx, err := scenario.LoadFixture(file)
			if err != nil {
				t.Fatal(err)
			}
			out := fixtures.Run(t.Context(), fx, fixtures.RunOptions{Runner: fixtures.Real(fixtures.Defaults)})
			if out.Err != nil {
				t.Fatal(out.Err)
			}
			for _, f := range out.Failures() {
				t.Errorf("%s:%d: %s", file, f.Expectation.Line, f)
			}
		})
	}
}
