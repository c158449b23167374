package leasefence_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
)

// memoryGate adapts the in-memory FenceGate to the conformance suite: its
// write appends to a slice that only the gate's writes touch.
type memoryGate struct {
	gate    *leasefence.FenceGate
	mu      sync.Mutex // for Written, read from outside the gate
	written []string
}

func (m *memoryGate) Commit(ctx context.Context, t leasefence.Token, value string) error {
	return m.gate.Commit(ctx, t, func(context.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.written = append(m.written, value)
		return nil
	})
}

func (m *memoryGate) Admit(_ context.Context, t leasefence.Token) error { return m.gate.Admit(t) }

func (m *memoryGate) Floor(context.Context) (leasefence.Token, error) { return m.gate.Floor(), nil }

func (m *memoryGate) Rejections(context.Context) ([]leasefence.Rejection, error) {
	return m.gate.Rejections(), nil
}

func (m *memoryGate) Written(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.written), nil
}

func TestFenceGateConformance(t *testing.T) {
	leasetest.TestGate(t, func(t *testing.T, resource string) leasetest.Gate {
		return &memoryGate{gate: leasefence.NewFenceGate(resource)}
	})
}
