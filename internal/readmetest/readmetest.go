// Package readmetest keeps the README's and the guides' (docs/*.md) text
// true to the code, in three ways:
//
//   - A capture is a fenced code block right after a marker line
//
//     <!-- capture NAME: how to regenerate it -->
//
//     and the test of the package that prints it compares the block with
//     what the code prints now, byte for byte (Check).
//
//   - A value is a number or phrase quoted in prose, between
//
//     <!-- value NAME -->24<!-- /value -->
//
//     and the test that computes it compares it (CheckValues); markdown
//     renders neither comment, so the prose reads as plain text.
//
//   - A program is a fenced go block after
//
//     <!-- program DIR EXAMPLE -->
//
//     (DIR from the repository's root, EXAMPLE the name of an Example
//     function in DIR's test files) and must be exactly the complete
//     program go/doc makes of that Example (package main, its imports), the
//     one pkg.go.dev shows; a block after <!-- output DIR EXAMPLE --> must
//     be its Output. The Example itself runs in its module's go test.
//     Every go block that is a program (begins with "package main") must
//     be one of these (Programs, run by this package's own test).
//
// Under -update each rewrites what it checks. So none of them can go stale
// without a test failing. It is for tests only, and knows nothing of what
// the captures show.
package readmetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Check compares the capture name, wherever it is in the README and the
// guides, with got; with update it rewrites the capture to got instead.
// got is the block's content: lines, each ending in a newline.
func Check(t testing.TB, name, got string, update bool) {
	t.Helper()
	docs, err := Docs()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(got, "\n") {
		got += "\n"
	}
	var found []string
	for _, d := range docs {
		start, end, err := find(d.Text, name)
		if err != nil {
			continue
		}
		found = append(found, d.Path)
		if update {
			d.Text = splice(d.Text, start, end, got)
			if err := os.WriteFile(d.Path, d.Text, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if want := string(d.Text[start:end]); want != got {
			t.Errorf("%s: the capture %q is stale (go test -update rewrites it):\n--- %s\n%s--- now\n%s", d.Path, name, filepath.Base(d.Path), want, got)
		}
	}
	switch len(found) {
	case 0:
		t.Fatalf("no capture %q (a line %q) in README.md or docs/*.md", name, "<!-- capture "+name+": ... -->")
	case 1:
	default:
		t.Errorf("the capture %q is in %d places (%s): one source of truth, please", name, len(found), strings.Join(found, ", "))
	}
}

// valueRE matches a value in prose: its name and its text.
var valueRE = regexp.MustCompile(`<!-- value ([^ ]+) -->(.*?)<!-- /value -->`)

// CheckValues compares every value of the README and the guides whose name
// begins with prefix with values[name], and rewrites them under update. A
// value of that prefix that values does not give is an error: a number in
// prose that no test computes. So is a name in values that no document
// quotes.
func CheckValues(t testing.TB, prefix string, values map[string]string, update bool) {
	t.Helper()
	docs, err := Docs()
	if err != nil {
		t.Fatal(err)
	}
	quoted := map[string]bool{}
	for _, d := range docs {
		changed := false
		text := valueRE.ReplaceAllFunc(d.Text, func(m []byte) []byte {
			sub := valueRE.FindSubmatch(m)
			name, have := string(sub[1]), string(sub[2])
			if !strings.HasPrefix(name, prefix) {
				return m
			}
			quoted[name] = true
			want, ok := values[name]
			switch {
			case !ok:
				t.Errorf("%s: the value %q is quoted but no test gives it", d.Path, name)
				return m
			case have == want:
				return m
			case update:
				changed = true
				return []byte("<!-- value " + name + " -->" + want + "<!-- /value -->")
			}
			t.Errorf("%s: the value %q reads %q, the code says %q (go test -update rewrites it)", d.Path, name, have, want)
			return m
		})
		if changed {
			if err := os.WriteFile(d.Path, text, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var unused []string
	for name := range values {
		if !quoted[name] {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	for _, name := range unused {
		t.Errorf("the value %q is computed but quoted nowhere (a line %q)", name, "<!-- value "+name+" -->...<!-- /value -->")
	}
}

// Doc is one markdown file of the repository: the README or a guide.
type Doc struct {
	Path string // absolute
	Rel  string // from the repository's root
	Text []byte
}

// Docs reads README.md and docs/*.md from the repository's root.
func Docs() ([]*Doc, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	var docs []*Doc
	for _, p := range append([]string{filepath.Join(root, "README.md")}, guides...) {
		text, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, p)
		docs = append(docs, &Doc{Path: p, Rel: rel, Text: text})
	}
	return docs, nil
}

// find returns where the content of the fenced block after the marker of
// name starts and ends in data.
func find(data []byte, name string) (start, end int, err error) {
	return blockAfter(data, "<!-- capture "+name+":")
}

// blockAfter returns where the content of the fenced block after the first
// line beginning with marker starts and ends in data.
func blockAfter(data []byte, marker string) (start, end int, err error) {
	i := bytes.Index(data, []byte(marker))
	if i < 0 {
		return 0, 0, fmt.Errorf("no %q marker", marker)
	}
	return blockAt(data, i, marker)
}

// blockAt returns where the content of the fenced block after the marker
// at offset i of data starts and ends.
func blockAt(data []byte, i int, marker string) (start, end int, err error) {
	rest := data[i:]
	open := bytes.Index(rest, []byte("\n```"))
	if open < 0 {
		return 0, 0, fmt.Errorf("%q: no fenced block after the marker", marker)
	}
	nl := bytes.IndexByte(rest[open+1:], '\n')
	if nl < 0 {
		return 0, 0, fmt.Errorf("%q: the block never opens", marker)
	}
	start = i + open + 1 + nl + 1
	closing := bytes.Index(data[start:], []byte("```\n"))
	if closing < 0 || (closing > 0 && data[start+closing-1] != '\n') {
		return 0, 0, fmt.Errorf("%q: the block never closes", marker)
	}
	return start, start + closing, nil
}

func splice(data []byte, start, end int, with string) []byte {
	return append(append(append([]byte{}, data[:start]...), with...), data[end:]...)
}

// Root is the repository's root: the directory of go.work, found from the
// working directory upwards, or else of the outermost go.mod (a test runs
// in its package's directory, inside some module of the repository).
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root := ""
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			root = dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if root == "" {
		return "", fmt.Errorf("no go.mod above the test's directory")
	}
	return root, nil
}
