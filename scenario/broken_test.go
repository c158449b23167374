package scenario_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasefence/lab/scenario"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata/broken")

// TestBrokenFixtures reads each file of testdata/broken and compares every
// problem reported with its .golden file: the exact messages, in the
// order of their lines, none hidden by another.
func TestBrokenFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/broken/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in testdata/broken (%v)", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.ToSlash(file)
			_, err = scenario.ParseFixture(name, data)
			if err == nil {
				t.Fatal("parsed")
			}
			for _, e := range fileErrors(err) {
				if e.Line == 0 {
					t.Errorf("no line: %v", e)
				}
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("problems reported:\n%s\nwant (%s):\n%s", got, golden, want)
			}
		})
	}
}

// fileErrors lists the *FileErrors of err, joined or alone.
func fileErrors(err error) []*scenario.FileError {
	var out []*scenario.FileError
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var fe *scenario.FileError
		if errors.As(e, &fe) {
			out = append(out, fe)
		}
	}
	return out
}
