package readmetest

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/doc"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// programRE matches a program's or an output's marker: its kind, the
// directory of the Example and its function name.
var programRE = regexp.MustCompile(`<!-- (program|output) ([^ ]+) (Example[A-Za-z0-9_]*) -->`)

// Programs checks every program and output marker of the README and the
// guides against the Example it names, rewriting them under update, and
// that every go block that begins with "package main" follows a program
// marker.
func Programs(t *testing.T, update bool) {
	t.Helper()
	docs, err := Docs()
	if err != nil {
		t.Fatal(err)
	}
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		checkUnmarked(t, d)
		changed := false
		for _, m := range programRE.FindAllSubmatch(d.Text, -1) {
			kind, dir, name := string(m[1]), string(m[2]), string(m[3])
			want, err := exampleText(filepath.Join(root, dir), name, kind == "output")
			if err != nil {
				t.Errorf("%s: %s %s %s: %v", d.Rel, kind, dir, name, err)
				continue
			}
			start, end, err := blockAfter(d.Text, string(m[0]))
			if err != nil {
				t.Errorf("%s: %v", d.Rel, err)
				continue
			}
			if have := string(d.Text[start:end]); have != want {
				if update {
					d.Text = splice(d.Text, start, end, want)
					changed = true
					continue
				}
				t.Errorf("%s: the %s of %s.%s is stale (go test ./internal/readmetest -update rewrites it):\n--- %s\n%s--- %s\n%s", d.Rel, kind, dir, name, d.Rel, have, dir, want)
			}
		}
		if changed {
			if err := os.WriteFile(d.Path, d.Text, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkUnmarked reports a go block that is a program but names no Example.
func checkUnmarked(t *testing.T, d *Doc) {
	t.Helper()
	lines := strings.Split(string(d.Text), "\n")
	inBlock := false
	for i, l := range lines {
		switch {
		case !inBlock && strings.HasPrefix(l, "```go"):
			inBlock = true
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "package main") {
				if j := i - 1; j < 0 || !programRE.MatchString(lines[j]) || !strings.Contains(lines[j], "<!-- program ") {
					t.Errorf("%s:%d: a program that names no Example (a line <!-- program DIR ExampleName --> just above): it must run in go test", d.Rel, i+1)
				}
			}
		case inBlock && strings.HasPrefix(l, "```"):
			inBlock = false
		}
	}
}

// exampleText returns the complete program go/doc makes of the Example
// name among dir's test files, formatted, or its Output.
func exampleText(dir, name string, output bool) (string, error) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return "", err
	}
	var files []*ast.File
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return "", err
		}
		files = append(files, f)
	}
	for _, f := range files {
		for _, ex := range doc.Examples(f) {
			if "Example"+ex.Name != name {
				continue
			}
			if output {
				if ex.Output == "" {
					return "", fmt.Errorf("it has no Output")
				}
				return ex.Output, nil
			}
			if ex.Play == nil {
				return "", fmt.Errorf("go/doc makes no program of it (an Example of an external _test package, using nothing of the test package but itself)")
			}
			var b bytes.Buffer
			if err := format.Node(&b, fset, ex.Play); err != nil {
				return "", err
			}
			return b.String(), nil
		}
	}
	return "", fmt.Errorf("no such Example in %s's test files", dir)
}
