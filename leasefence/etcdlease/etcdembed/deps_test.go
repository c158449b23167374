package etcdembed_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// A program links this package to run etcd (the lab's etcd backend), so it
// must not link package testing, directly or through etcd's server.
func TestLinksNoTesting(t *testing.T) {
	// go test puts its own go command first on PATH.
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "go.etcd.io/etcd/server/v3/embed") {
		t.Fatalf("go list -deps lists no etcd embed among %d packages: the listing is not etcdembed's", len(deps))
	}
	if slices.Contains(deps, "testing") {
		t.Error("package etcdembed links package testing")
	}
}
