// Package readmetest keeps the README's captures true: each is a fenced
// code block right after a marker line
//
//	<!-- capture NAME: how to regenerate it -->
//
// and the test of the package that prints it compares the block with what
// the code prints now, byte for byte, and rewrites the block under
// -update. So a capture cannot go stale without a test failing.
//
// It is for tests only, and knows nothing of what the captures show.
package readmetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Check compares the README's capture name with got; with update it
// rewrites the capture to got instead. got is the block's content: lines,
// each ending in a newline.
func Check(t testing.TB, name, got string, update bool) {
	t.Helper()
	path, err := readmePath()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	start, end, err := find(data, name)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !strings.HasSuffix(got, "\n") {
		got += "\n"
	}
	if update {
		out := append(append(append([]byte{}, data[:start]...), got...), data[end:]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want := string(data[start:end]); want != got {
		t.Errorf("the README's capture %q is stale (go test -update rewrites it):\n--- README\n%s--- now\n%s", name, want, got)
	}
}

// find returns where the content of the fenced block after the marker of
// name starts and ends in data.
func find(data []byte, name string) (start, end int, err error) {
	marker := []byte("<!-- capture " + name + ":")
	i := bytes.Index(data, marker)
	if i < 0 {
		return 0, 0, fmt.Errorf("no capture %q (a line %q)", name, string(marker)+" ... -->")
	}
	rest := data[i:]
	open := bytes.Index(rest, []byte("\n```"))
	if open < 0 {
		return 0, 0, fmt.Errorf("capture %q: no fenced block after its marker", name)
	}
	nl := bytes.IndexByte(rest[open+1:], '\n')
	if nl < 0 {
		return 0, 0, fmt.Errorf("capture %q: the block never opens", name)
	}
	start = i + open + 1 + nl + 1
	closing := bytes.Index(data[start:], []byte("```\n"))
	if closing < 0 || (closing > 0 && data[start+closing-1] != '\n') {
		return 0, 0, fmt.Errorf("capture %q: the block never closes", name)
	}
	return start, start + closing, nil
}

// readmePath is the README.md beside the module's go.mod, found from the
// test's working directory (its package's directory) upwards.
func readmePath() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "README.md"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the test's directory")
		}
		dir = parent
	}
}
