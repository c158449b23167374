package installtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leasefence/lab/internal/readmetest"
)

// TestReleaseTagsEveryModule runs scripts/release.sh on a copy of the
// repository's tracked files: every library module (every go.mod under
// leasefence/ but the test module's) gets a tag at the version, and every
// go.mod that requires one of them requires it at that version.
func TestReleaseTagsEveryModule(t *testing.T) {
	if testing.Short() {
		t.Skip("tidies every module of a copy of the repository")
	}
	root, err := readmetest.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := git(t, root, "ls-files", "-z")
	for _, f := range strings.Split(strings.TrimRight(files, "\x00"), "\x00") {
		src, dst := filepath.Join(root, f), filepath.Join(dir, f)
		data, err := os.ReadFile(src)
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the working tree, not yet committed
			}
			t.Fatal(err)
		}
		info, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")

	const version = "v0.9.9"
	cmd := exec.CommandContext(t.Context(), "bash", "scripts/release.sh", version)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("release.sh %s: %v\n%s", version, err, out)
	}

	var libs []string
	for _, m := range strings.Fields(git(t, dir, "ls-files", "--", "leasefence/go.mod", "leasefence/*/go.mod")) {
		if d := filepath.Dir(m); d != "leasefence/tests" {
			libs = append(libs, d)
		}
	}
	if !slices.Contains(libs, "leasefence/leaseotel") || !slices.Contains(libs, "leasefence/etcdlease/etcdembed") || !slices.Contains(libs, "leasefence/etcdlease/etcdtest") {
		t.Fatalf("library modules %v: the listing misses some", libs)
	}
	for _, lib := range libs {
		if !regexp.MustCompile(`(?m)^\s*git tag ` + regexp.QuoteMeta(lib+"/"+version) + `$`).Match(out) {
			t.Errorf("release.sh prints no tag %s/%s:\n%s", lib, version, out)
		}
	}
	require := regexp.MustCompile(`(?m)^\s*(?:require\s+)?(github\.com/leasefence/lab/leasefence\S*)\s+(v\S+)`)
	for _, m := range strings.Fields(git(t, dir, "ls-files", "--", "go.mod", "*/go.mod")) {
		data, err := os.ReadFile(filepath.Join(dir, m))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range require.FindAllStringSubmatch(string(data), -1) {
			if r[2] != version {
				t.Errorf("%s requires %s at %s after release.sh %s", m, r[1], r[2], version)
			}
		}
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}
