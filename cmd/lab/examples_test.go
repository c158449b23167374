package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// yamlDocs reads every document of a YAML file.
func yamlDocs(t *testing.T, name string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []map[string]any
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		docs = append(docs, doc)
	}
}

// dig walks a YAML document by keys and list indices.
func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: %q is not in a map", path, k)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v: no item %d", path, k)
			}
			v = l[k]
		}
	}
	return v
}

var (
	shardCommand = regexp.MustCompile(`lab swarm (.*) --shard "?([^"/ ]+)/(\d+)"? --json`)
	mergeCommand = regexp.MustCompile(`lab swarm --merge (\S+)`)
)

// runExample runs an example's shard command for each index, with fewer
// seeds of a shorter scenario, then its merge command on what they wrote:
// the example works as it stands but for its size.
func runExample(t *testing.T, shardLine, mergeLine string, count int) {
	t.Helper()
	m := shardCommand.FindStringSubmatch(shardLine)
	if m == nil {
		t.Fatalf("no lab swarm --shard I/N --json in %q", shardLine)
	}
	if n, _ := strconv.Atoi(m[3]); n != count {
		t.Fatalf("%q shards in %s, but %d run", shardLine, m[3], count)
	}
	args := strings.Fields(m[1])
	for i, a := range args {
		if a == "--seeds" {
			args[i+1] = "12"
		}
	}
	args = append(args, "--duration", "5s")
	dir := t.TempDir()
	for i := range count {
		code, stdout, stderr := runLab(append(append([]string{"swarm"}, args...), "--shard", fmt.Sprintf("%d/%d", i, count), "--json")...)
		if code != exitOK {
			t.Fatalf("shard %d: exit %d\n%s", i, code, stderr)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("shard-%d.json", i)), []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mm := mergeCommand.FindStringSubmatch(mergeLine)
	if mm == nil || filepath.Base(mm[1]) != "shard-*.json" {
		t.Fatalf("no lab swarm --merge shard-*.json in %q", mergeLine)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "shard-*.json"))
	code, stdout, stderr := runLab(append([]string{"swarm", "--merge"}, files...)...)
	if code != exitOK || !strings.Contains(stdout, "  seeds run            12\n") {
		t.Fatalf("merge: exit %d\n%s%s", code, stdout, stderr)
	}
}

func TestKubernetesIndexedJobExample(t *testing.T) {
	docs := yamlDocs(t, "../../examples/swarm/kubernetes-indexed-job.yaml")
	var shards, merge map[string]any
	for _, d := range docs {
		switch dig(t, d, "metadata", "name") {
		case "lab-swarm":
			shards = d
		case "lab-swarm-merge":
			merge = d
		}
	}
	if shards == nil || merge == nil {
		t.Fatal("no lab-swarm and lab-swarm-merge Jobs")
	}
	spec := dig(t, shards, "spec").(map[string]any)
	if spec["completionMode"] != "Indexed" || fmt.Sprint(spec["completions"]) != fmt.Sprint(spec["parallelism"]) {
		t.Fatalf("the shards' Job: %v", spec)
	}
	count, _ := strconv.Atoi(fmt.Sprint(spec["completions"]))
	line := dig(t, spec, "template", "spec", "containers", 0, "args", 0).(string)
	if !strings.Contains(line, `--shard "$JOB_COMPLETION_INDEX/`) {
		t.Fatalf("the shard is not taken from JOB_COMPLETION_INDEX: %q", line)
	}
	if rule := fmt.Sprint(dig(t, spec, "podFailurePolicy", "rules", 0)); !strings.Contains(rule, "FailIndex") || !strings.Contains(rule, "[1 2]") {
		t.Fatalf("exit statuses 1 and 2 are retried: %s", rule)
	}
	mergeLine := dig(t, merge, "spec", "template", "spec", "containers", 0, "args", 0).(string)
	if !strings.Contains(mergeLine, fmt.Sprintf("-ge %d ]", count)) {
		t.Fatalf("the merge does not wait for %d shards: %q", count, mergeLine)
	}
	runExample(t, line, mergeLine, count)
}

func TestCIMatrixExample(t *testing.T) {
	docs := yamlDocs(t, "../../examples/swarm/github-actions.yml")
	if len(docs) != 1 {
		t.Fatalf("%d documents", len(docs))
	}
	jobs := dig(t, docs[0], "jobs")
	indices := dig(t, jobs, "shard", "strategy", "matrix", "index").([]any)
	for i, x := range indices {
		if fmt.Sprint(x) != strconv.Itoa(i) {
			t.Fatalf("matrix indices %v are not 0 to n-1", indices)
		}
	}
	find := func(job, what string) string {
		for _, s := range dig(t, jobs, job, "steps").([]any) {
			if run, ok := s.(map[string]any)["run"].(string); ok && strings.Contains(run, what) {
				return run
			}
		}
		t.Fatalf("job %s has no step running %q", job, what)
		return ""
	}
	shard := strings.ReplaceAll(find("shard", "--shard"), "${{ matrix.index }}", "I")
	shard = strings.Replace(shard, "./lab swarm", "lab swarm", 1)
	runExample(t, shard, find("merge", "--merge"), len(indices))
}
