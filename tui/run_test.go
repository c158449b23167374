package tui

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		tick    time.Duration
		wantErr bool
		use     time.Duration
	}{
		{tick: 0, use: DefaultTick},
		{tick: MinTick, use: MinTick},
		{tick: MaxTick, use: MaxTick},
		{tick: 40 * time.Millisecond, use: 40 * time.Millisecond},
		{tick: MinTick - 1, wantErr: true, use: MinTick},
		{tick: time.Second, wantErr: true, use: MaxTick},
		{tick: -time.Millisecond, wantErr: true, use: MinTick},
	}
	for _, tt := range tests {
		o := Options{Tick: tt.tick}
		err := o.Validate()
		if (err != nil) != tt.wantErr {
			t.Errorf("Tick %v: Validate() = %v, want error %v", tt.tick, err, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "tick") {
			t.Errorf("Tick %v: error %q does not name the tick", tt.tick, err)
		}
		if got := o.tick(); got != tt.use {
			t.Errorf("Tick %v: frames every %v, want %v", tt.tick, got, tt.use)
		}
	}
}

// The Run tests pause the Live first: they check Run's lifecycle, and
// nothing in them may depend on how far wall time paced the simulation.

func TestRunRefusesBadOptions(t *testing.T) {
	live := newLive(t, "gap")
	err := Run(t.Context(), live, Options{Tick: time.Millisecond}, tea.WithInput(strings.NewReader("")), tea.WithOutput(io.Discard))
	if err == nil || !strings.Contains(err.Error(), "tick") {
		t.Fatalf("Run with a 1ms tick: %v, want an error naming the tick", err)
	}
}

func TestRunQuitsOnQ(t *testing.T) {
	live := newLive(t, "gap")
	live.SetPaused(true)
	err := Run(t.Context(), live, Options{}, tea.WithInput(strings.NewReader("q")), tea.WithOutput(io.Discard))
	if err != nil {
		t.Fatalf("quitting returned %v, want nil", err)
	}
}

func TestRunEndsWithContext(t *testing.T) {
	live := newLive(t, "gap")
	live.SetPaused(true)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	in, _ := io.Pipe() // input that never ends: only ctx can stop the program
	err := Run(ctx, live, Options{}, tea.WithInput(in), tea.WithOutput(io.Discard))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a cancelled context returned %v, want context.Canceled", err)
	}
}
