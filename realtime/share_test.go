package realtime_test

import (
	"errors"
	"testing"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

// What cannot be reached from another process says so, matching
// ErrNotShared: a backend with no Share, a contender that says not how,
// an entry with no attacher, a store beside a backend the process did not
// attach.
func TestNotShared(t *testing.T) {
	ctx := t.Context()
	if _, err := realtime.Share(registry.Memory, realtime.NewMemory()); !errors.Is(err, realtime.ErrNotShared) {
		t.Errorf("the in-memory coordinator: %v", err)
	}
	if _, err := realtime.Share(registry.Redsync, &realtime.Contender{}); !errors.Is(err, realtime.ErrNotShared) {
		t.Errorf("a contender with no Share: %v", err)
	}
	if s, err := realtime.Share(registry.Redsync, &realtime.Contender{Share: "addr"}); err != nil || s != "addr" {
		t.Errorf("a contender's Share: %q, %v", s, err)
	}
	if _, err := realtime.AttachBackend(ctx, registry.Memory, ""); !errors.Is(err, realtime.ErrNotShared) {
		t.Errorf("attaching the in-memory coordinator: %v", err)
	}
	if _, err := realtime.AttachStore(ctx, registry.Memory, "", nil); !errors.Is(err, realtime.ErrNotShared) {
		t.Errorf("attaching the in-memory gates: %v", err)
	}
	if _, err := realtime.AttachContender(ctx, "naive", ""); !errors.Is(err, realtime.ErrNotShared) {
		t.Errorf("attaching a contender with no attacher: %v", err)
	}
	beside := realtime.StoreBeside(func(*realtime.Contender) realtime.Store { return realtime.MemoryStore{} })
	if _, err := beside(ctx, "", realtime.NewMemory()); !errors.Is(err, realtime.ErrNotShared) {
		t.Errorf("gates beside a backend the process did not attach: %v", err)
	}
	if st, err := beside(ctx, "", &realtime.Contender{}); err != nil || st == nil {
		t.Errorf("gates beside the right backend: %v, %v", st, err)
	}
}
