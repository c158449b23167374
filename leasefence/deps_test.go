package leasefence_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestStandardLibraryOnly: the library imports nothing but the standard
// library (everything else in the module depends on it, never the other way
// round). Test files may import what they like. A standard-library package
// imports only others of its kind, so the direct imports decide.
func TestStandardLibraryOnly(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range pkg.Imports {
		first, _, _ := strings.Cut(path, "/")
		if strings.Contains(first, ".") || path == "C" {
			t.Errorf("leasefence imports %q, which is not in the standard library", path)
		}
	}
	if len(pkg.Imports) == 0 {
		t.Fatalf("no imports found in %s: the check looked at the wrong directory", pkg.Dir)
	}
}
