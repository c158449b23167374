package readmetest

import "testing"

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
