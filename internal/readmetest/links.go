package readmetest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// linkRE matches a markdown link's target.
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Links checks that every relative link of the README and the guides
// reaches a file of the repository and, with a #fragment, one of its
// headings (as GitHub names their anchors): a section moved out of the
// README stays reachable from where it is named.
func Links(t *testing.T) {
	t.Helper()
	docs, err := Docs()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		for _, m := range linkRE.FindAllSubmatch(d.Text, -1) {
			target := string(m[1])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := d.Path
			if file != "" {
				path = filepath.Join(filepath.Dir(d.Path), file)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				if info, serr := os.Stat(path); serr == nil && info.IsDir() && frag == "" {
					continue
				}
				t.Errorf("%s: the link %s reaches no file", d.Rel, target)
				continue
			}
			if frag != "" && !hasAnchor(data, frag) {
				t.Errorf("%s: the link %s names no heading of %s", d.Rel, target, filepath.Base(path))
			}
		}
	}
}

// hasAnchor reports whether a heading of markdown doc has the anchor.
func hasAnchor(doc []byte, anchor string) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		if slug(strings.TrimLeft(line, "# ")) == anchor {
			return true
		}
	}
	return false
}

// slug is GitHub's anchor of a heading: lower case, spaces as hyphens,
// and every other character but letters, digits, hyphens and underscores
// dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
