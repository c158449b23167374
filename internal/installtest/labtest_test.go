package installtest

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/internal/readmetest"
)

var (
	// labtestRE is the block that makes labtest importable.
	labtestRE = regexp.MustCompile("(?s)<!-- install labtest: [^\n]*-->\n```\n(.*?)```\n")
	// fileRE is a go block that is a file of the repository, whole.
	fileRE = regexp.MustCompile("(?s)<!-- file ([^ ]+) -->\n```go\n(.*?)```\n")
)

// docFile is a file a guide shows whole.
type docFile struct {
	doc, path, text string
}

// docFiles are the files the README and the guides show whole.
func docFiles(t *testing.T) []docFile {
	t.Helper()
	docs, err := readmetest.Docs()
	if err != nil {
		t.Fatal(err)
	}
	var out []docFile
	for _, d := range docs {
		for _, m := range fileRE.FindAllSubmatch(d.Text, -1) {
			out = append(out, docFile{doc: d.Rel, path: string(m[1]), text: string(m[2])})
		}
	}
	return out
}

// A file a guide shows whole is the repository's file, byte for byte: the
// code a reader copies is the code go test runs.
func TestDocFilesAreTheRepositorys(t *testing.T) {
	root, err := readmetest.Root()
	if err != nil {
		t.Fatal(err)
	}
	files := docFiles(t)
	if len(files) == 0 {
		t.Fatal("no file (<!-- file PATH --> before a go block) in README.md or docs/*.md")
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.path)))
		if err != nil {
			t.Errorf("%s shows %s: %v", f.doc, f.path, err)
			continue
		}
		if string(data) != f.text {
			t.Errorf("%s shows %s otherwise than it is: copy the file into the block\n--- %s\n%s--- %s\n%s", f.doc, f.path, f.doc, f.text, f.path, data)
		}
	}
}

// TestLabtestFromScratch does what docs/contenders.md tells a user: a
// module of their own whose go.mod is the labtest install block, the
// worked example's files (as the guide shows them) in it, go mod tidy, go
// test (GOWORK=off). The example's lock passes CheckVirtual with the
// verdict the guide gives (exclusion kept, naive stale writes reported);
// the same lock with a Release that deletes the key whoever holds it fails,
// naming the broken exclusion, the scenario and the seed.
func TestLabtestFromScratch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests the worked example in a scratch module")
	}
	docs, err := readmetest.Docs()
	if err != nil {
		t.Fatal(err)
	}
	root, err := readmetest.Root()
	if err != nil {
		t.Fatal(err)
	}
	var block []byte
	for _, d := range docs {
		if m := labtestRE.FindSubmatch(d.Text); m != nil {
			block = m[1]
		}
	}
	if block == nil {
		t.Fatal("no labtest install block (<!-- install labtest: ... --> before a fenced block) in README.md or docs/*.md")
	}
	if !bytes.Contains(block, []byte(clone)) {
		t.Fatalf("the block names no clone at %s:\n%s", clone, block)
	}
	files := map[string]string{"go.mod": "module example.com/mylock\n\ngo 1.26.0\n\n" + strings.ReplaceAll(string(block), clone, root),
		"broken_test.go": brokenRelease}
	for _, f := range docFiles(t) {
		if strings.HasPrefix(f.path, "examples/setnxlock/") {
			files[filepath.Base(f.path)] = f.text
		}
	}
	if len(files) != 4 {
		t.Fatalf("the scratch module has files %v: want the guide's setnxlock.go and setnxlock_test.go", files)
	}
	dir := userModule(t, files)
	if out, err := goIn(t, dir, "mod", "tidy").CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy in a scratch module on the block: %v\n%s\n--- go.mod\n%s", err, out, files["go.mod"])
	}
	began := time.Now()
	out, err := goIn(t, dir, "test", "-count=1", "-v", "-run", "^TestUnderTheLab$", ".").CombinedOutput()
	t.Logf("the worked example's go test took %s of wall time (its build included)", time.Since(began).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("go test of the worked example: %v\n%s", err, out)
	}
	for _, want := range []string{"--- PASS: TestUnderTheLab", "lock:     held: the lock kept exclusion", "writes:   broken:", "kept exclusion; writes without a fence landed"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("go test of the worked example does not say %q:\n%s", want, out)
		}
	}
	out, err = goIn(t, dir, "test", "-count=1", "-run", "^TestBrokenReleaseUnderTheLab$", ".").CombinedOutput()
	if err == nil {
		t.Fatalf("the unconditional-DEL release passed:\n%s", out)
	}
	for _, want := range []string{"the lock is broken", "mutual-exclusion violation", "seed ", "history: "} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the unconditional-DEL release's failure does not say %q:\n%s", want, out)
		}
	}
}

// brokenRelease is a test the user did not write: the worked example's
// lock with a Release that deletes the key whoever holds it, the classic
// bug of the Redis locks.
const brokenRelease = `package setnxlock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasefence/lab/labtest"
)

type delLocker struct{ locker }

func (l delLocker) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (labtest.Lease, error) {
	le, err := l.locker.Acquire(ctx, resource, holder, ttl)
	if err != nil {
		return nil, err
	}
	return delLease{le.(lease)}, nil
}

type delLease struct{ lease }

func (l delLease) Release(ctx context.Context) error { return l.rdb.Del(ctx, l.key).Err() }

func TestBrokenReleaseUnderTheLab(t *testing.T) {
	labtest.CheckVirtual(t, func(rdb *redis.Client) labtest.Lock { return delLocker{locker{New(rdb)}} })
}
`
