package readmetest

import (
	"bytes"
	"fmt"
	"go/doc"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// programRE matches a program's, an output's or a fragment's marker: its
// kind, the directory of the Example and its function name.
var programRE = regexp.MustCompile(`<!-- (program|output|fragment) ([^ ]+) (Example[A-Za-z0-9_]*) -->`)

// Programs checks every program, output and fragment marker of the README
// and the guides against the Example it names, and that every go block
// that begins with "package main" follows a program marker. A program is
// the complete program go/doc makes of the Example and an output its
// Output, both rewritten under update; a fragment is lines of code that
// must appear, one after another, in the Example's body, so that the
// lines a reader copies compile and run in go test (update cannot write
// them: the Example is their source).
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
		if checkMarkers(t, d, root, update) {
			if err := os.WriteFile(d.Path, d.Text, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkMarkers checks each program, output and fragment marker of d
// against the block after that marker (a marker may repeat: each checks
// its own block), and reports whether it rewrote d.Text under update. It
// goes from the last marker to the first, so that rewriting a block moves
// no marker still to be checked.
func checkMarkers(t testing.TB, d *Doc, root string, update bool) (changed bool) {
	t.Helper()
	locs := programRE.FindAllSubmatchIndex(d.Text, -1)
	for _, loc := range slices.Backward(locs) {
		at := loc[0]
		marker := string(d.Text[loc[0]:loc[1]])
		kind, dir, name := string(d.Text[loc[2]:loc[3]]), string(d.Text[loc[4]:loc[5]]), string(d.Text[loc[6]:loc[7]])
		if kind == "fragment" {
			checkFragment(t, d, at, marker, filepath.Join(root, dir), name)
			continue
		}
		want, err := exampleText(filepath.Join(root, dir), name, kind == "output")
		if err != nil {
			t.Errorf("%s: %s %s %s: %v", d.Rel, kind, dir, name, err)
			continue
		}
		start, end, err := blockAt(d.Text, at, marker)
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
	return changed
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

// checkFragment reports the fragment after the marker at offset at in d
// unless its lines are a run of consecutive lines of the body of the
// Example name in dir (indentation aside).
func checkFragment(t testing.TB, d *Doc, at int, marker, dir, name string) {
	t.Helper()
	start, end, err := blockAt(d.Text, at, marker)
	if err != nil {
		t.Errorf("%s: %v", d.Rel, err)
		return
	}
	ex, fset, err := findExample(dir, name)
	if err != nil {
		t.Errorf("%s: fragment of %s: %v", d.Rel, name, err)
		return
	}
	var b bytes.Buffer
	if err := format.Node(&b, fset, &printer.CommentedNode{Node: ex.Code, Comments: ex.Comments}); err != nil {
		t.Errorf("%s: fragment of %s: %v", d.Rel, name, err)
		return
	}
	body := trimmedLines(b.String())
	frag := trimmedLines(string(d.Text[start:end]))
	if len(frag) == 0 {
		t.Errorf("%s: the fragment of %s is empty", d.Rel, name)
		return
	}
	for i := 0; i+len(frag) <= len(body); i++ {
		if slices.Equal(body[i:i+len(frag)], frag) {
			return
		}
	}
	t.Errorf("%s: the fragment of %s is not in its body (its lines must be consecutive lines of the Example):\n--- %s\n%s\n--- %s\n%s",
		d.Rel, name, d.Rel, strings.Join(frag, "\n"), name, strings.Join(body, "\n"))
}

// trimmedLines returns the lines of s without their indentation, empty
// lines left out.
func trimmedLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// exampleText returns the complete program go/doc makes of the Example
// name among dir's test files, formatted, or its Output.
func exampleText(dir, name string, output bool) (string, error) {
	ex, fset, err := findExample(dir, name)
	if err != nil {
		return "", err
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

// findExample returns the Example name among dir's test files, as go/doc
// reads it, with the file set its positions are in.
func findExample(dir, name string) (*doc.Example, *token.FileSet, error) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, nil, err
	}
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return nil, nil, err
		}
		for _, ex := range doc.Examples(f) {
			if "Example"+ex.Name == name {
				return ex, fset, nil
			}
		}
	}
	return nil, nil, fmt.Errorf("no such Example in %s's test files", dir)
}
