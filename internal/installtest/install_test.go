// Package installtest checks that the install blocks of the README and the
// guides work as written: a scratch module whose go.mod is the block (with
// this checkout in place of the clone it names) tidies and builds with
// GOWORK=off, the module proxy as configured serving everything else. So
// the way in a user is given cannot break without a test failing.
package installtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leasefence/lab/internal/readmetest"
)

// clone is the path the install blocks give for the user's clone.
const clone = "../leasefence-lab"

var (
	blockRE   = regexp.MustCompile("(?s)<!-- install: [^\n]*-->\n```\n(.*?)```\n")
	requireRE = regexp.MustCompile(`(?m)^\s*(?:require\s+)?(github\.com/leasefence/lab/\S+)\s+v\S+\s*$`)
)

func TestInstallBlocks(t *testing.T) {
	docs, err := readmetest.Docs()
	if err != nil {
		t.Fatal(err)
	}
	root, err := readmetest.Root()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, d := range docs {
		for i, m := range blockRE.FindAllSubmatch(d.Text, -1) {
			found++
			block := string(m[1])
			t.Run(strings.TrimSuffix(d.Rel, ".md")+"#"+string(rune('1'+i)), func(t *testing.T) {
				checkBlock(t, root, block)
			})
		}
	}
	if found == 0 {
		t.Fatal("no install block (<!-- install: ... --> before a fenced block) in README.md or docs/*.md")
	}
}

// checkBlock builds a scratch module on block: its main package imports
// the root package of every module the block requires.
func checkBlock(t *testing.T, root, block string) {
	t.Helper()
	if !strings.Contains(block, clone) {
		t.Fatalf("the block names no clone at %s:\n%s", clone, block)
	}
	var imports []string
	for _, m := range requireRE.FindAllStringSubmatch(block, -1) {
		imports = append(imports, m[1])
	}
	if len(imports) == 0 {
		t.Fatalf("the block requires no module of the library:\n%s", block)
	}
	gomod := "module example.com/installcheck\n\ngo 1.26.0\n\n" + strings.ReplaceAll(block, clone, root)
	var main bytes.Buffer
	main.WriteString("package main\n\nimport (\n")
	for _, p := range imports {
		main.WriteString("\t_ \"" + p + "\"\n")
	}
	main.WriteString(")\n\nfunc main() {}\n")
	dir := scratchModule(t, gomod, main.String())
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", os.DevNull, "."}} {
		cmd := goIn(t, dir, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in a scratch module on the block:\n%s\n%s\n--- go.mod\n%s", strings.Join(args, " "), err, out, gomod)
		}
	}
	// tidy keeps what the block required: a module it dropped would mean
	// the block asks for something its imports do not use.
	tidied, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range imports {
		if !bytes.Contains(tidied, []byte(p+" v")) {
			t.Errorf("go mod tidy dropped %s from the block's require", p)
		}
	}
}

// A block that misses a sibling's replace fails: the check can fail.
func TestInstallBlockMissingAReplaceFails(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a scratch module")
	}
	root, err := readmetest.Root()
	if err != nil {
		t.Fatal(err)
	}
	gomod := "module example.com/installcheck\n\ngo 1.26.0\n\nrequire github.com/leasefence/lab/leasefence/sqlgate v0.0.0-00010101000000-000000000000\n\nreplace github.com/leasefence/lab/leasefence/sqlgate => " + root + "/leasefence/sqlgate\n"
	main := "package main\n\nimport _ \"github.com/leasefence/lab/leasefence/sqlgate\"\n\nfunc main() {}\n"
	dir := scratchModule(t, gomod, main)
	cmd := goIn(t, dir, "mod", "tidy")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("go mod tidy resolved sqlgate without a replace for leasefence:\n%s", out)
	}
	if !bytes.Contains(out, []byte("github.com/leasefence/lab/leasefence@v0.0.0-00010101000000-000000000000")) {
		t.Errorf("go mod tidy failed, but not on the placeholder of leasefence:\n%s", out)
	}
}

// TestQuickStart does what the README tells a user: a module of their own
// with the README's install block, the quick start's program as its
// main.go, go mod tidy, go run . (GOWORK=off); it must print what the
// README shows.
func TestQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quick start with an embedded etcd")
	}
	runProgram(t, "README.md", "leasefence/tests/etcdlease Example_lock")
}

// TestPostgresProgram does the same with docs/library.md's lease and gate
// in one database: sqllease.Lock in one call, writes through sqlgate, and
// the lapsed holder's write refused by the gate that checks the lease, on
// the PostgreSQL at $LEASEFENCE_PG_URL (a SQLite file when it is unset),
// from a module outside the repository.
func TestPostgresProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program with pgx and the pure-Go SQLite driver")
	}
	runProgram(t, "docs/library.md", "leasefence/tests/sqllease Example_postgres")
}

// runProgram builds a module of the user's own from the install block of
// the guide rel and its program named example (its <!-- program -->
// block), tidies it and runs it with GOWORK=off, and holds what it prints
// to the guide's <!-- output --> block of the same name.
func runProgram(t *testing.T, rel, example string) {
	t.Helper()
	docs, err := readmetest.Docs()
	if err != nil {
		t.Fatal(err)
	}
	root, err := readmetest.Root()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(docs, func(d *readmetest.Doc) bool { return d.Rel == rel })
	if i < 0 {
		t.Fatalf("no guide %s", rel)
	}
	text := string(docs[i].Text)
	block := blockRE.FindStringSubmatch(text)
	program := regexp.MustCompile("(?s)<!-- program " + regexp.QuoteMeta(example) + " -->\n```go\n(.*?)```\n").FindStringSubmatch(text)
	output := regexp.MustCompile("(?s)<!-- output " + regexp.QuoteMeta(example) + " -->\n```\n(.*?)```\n").FindStringSubmatch(text)
	if block == nil || program == nil || output == nil {
		t.Fatalf("%s lacks an install block, or the program %s or its output", rel, example)
	}
	gomod := "module example.com/userprogram\n\ngo 1.26.0\n\n" + strings.ReplaceAll(block[1], clone, root)
	dir := scratchModule(t, gomod, program[1])
	var out []byte
	for _, args := range [][]string{{"mod", "tidy"}, {"run", "."}} {
		cmd := goIn(t, dir, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err = cmd.Output()
		if err != nil {
			t.Fatalf("go %s in a module on %s's block and program: %v\n%s%s", strings.Join(args, " "), rel, err, out, stderr.Bytes())
		}
	}
	if string(out) != output[1] {
		t.Errorf("go run . printed:\n%s\n%s shows:\n%s", out, rel, output[1])
	}
}

// otelAPI matches the modules a user of leaseotel may find in their go.mod
// after go mod tidy: the library, leaseotel and the OpenTelemetry API with
// what the API itself requires.
var otelAPI = regexp.MustCompile(`^(github\.com/leasefence/lab/leasefence(/leaseotel)?|go\.opentelemetry\.io/otel(/(trace|metric|log))?|go\.opentelemetry\.io/auto/sdk|github\.com/go-logr/(logr|stdr)|github\.com/cespare/xxhash/v2)$`)

// TestLeaseotelAddsOnlyTheOTelAPI: a scratch module that imports
// leaseotel, tidied with GOWORK=off, requires nothing but leasefence,
// leaseotel and the OpenTelemetry API (no SDK, no exporter, no gRPC), and
// its build links none of them either.
func TestLeaseotelAddsOnlyTheOTelAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a scratch module")
	}
	root, err := readmetest.Root()
	if err != nil {
		t.Fatal(err)
	}
	const lib = "github.com/leasefence/lab/leasefence"
	gomod := "module example.com/traced\n\ngo 1.26.0\n\nrequire " + lib + "/leaseotel v0.0.0-00010101000000-000000000000\n\nreplace (\n" +
		"\t" + lib + " => " + root + "/leasefence\n\t" + lib + "/leaseotel => " + root + "/leasefence/leaseotel\n)\n"
	main := "package main\n\nimport (\n\t\"github.com/leasefence/lab/leasefence\"\n\t\"github.com/leasefence/lab/leasefence/leaseotel\"\n)\n\n" +
		"func main() {\n\thooks := leaseotel.NewHooks()\n\t_ = leasefence.NewFenceGate(\"slot\", leasefence.WithGateTrace(hooks.Gate))\n}\n"
	dir := scratchModule(t, gomod, main)
	run := func(args ...string) string {
		cmd := goIn(t, dir, args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	run("build", "-o", os.DevNull, ".")
	// The module graph may list the SDK, which leaseotel's own tests
	// require; the go.mod and the build may not.
	tidied, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*(?:require\s+)?([a-z0-9.-]+\.[a-z]+/\S+)\s+v\S+`).FindAllStringSubmatch(string(tidied), -1) {
		if !otelAPI.MatchString(m[1]) {
			t.Errorf("importing leaseotel added %s to the go.mod", m[1])
		}
	}
	for _, m := range strings.Fields(run("list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".")) {
		if m != "example.com/traced" && !otelAPI.MatchString(m) {
			t.Errorf("the build links %s", m)
		}
	}
}

// scratchModule writes a module of the user's own, its go.mod and its
// main.go, into a fresh directory, and returns the directory.
func scratchModule(t *testing.T, gomod, main string) string {
	t.Helper()
	return userModule(t, map[string]string{"go.mod": gomod, "main.go": main})
}

// userModule writes files, a module of the user's own, into a fresh
// directory, and returns the directory.
func userModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goIn is the go command in dir as a user's build runs it: outside the
// workspace (GOWORK=off), free to resolve what its go.mod lacks.
func goIn(t *testing.T, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	return cmd
}
