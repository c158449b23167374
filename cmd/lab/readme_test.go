package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/leasefence/lab/internal/readmetest"
)

// TestReadmeReport checks the README's sample report is what `lab run gap`
// prints, byte for byte; -update rewrites it.
func TestReadmeReport(t *testing.T) {
	var stdout, stderr bytes.Buffer
	a := &app{stdout: &stdout, stderr: &stderr, dashboard: nil}
	if code := a.main(context.Background(), []string{"run", "gap"}); code != exitOK {
		t.Fatalf("lab run gap: exit %d\n%s", code, stderr.String())
	}
	readmetest.Check(t, "lab run gap", stdout.String(), *update)
}
