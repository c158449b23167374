package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress is a one-line progress bar on stderr, redrawn in place with a
// carriage return. It draws only when stderr is a terminal, never more
// than ten times a second, and not at all for work that ends within its
// first half second. Safe for concurrent use.
type progress struct {
	w       io.Writer
	enabled bool
	label   string

	mu      sync.Mutex
	started time.Time
	last    time.Time
	width   int // of the last line drawn, to blank it
}

const (
	progressDelay    = 500 * time.Millisecond
	progressInterval = 100 * time.Millisecond
	progressBar      = 30
)

func (a *app) newProgress(label string) *progress {
	return &progress{w: a.stderr, enabled: a.stderrTTY, label: label, started: time.Now()}
}

// show draws the bar at frac (0 to 1) with a detail after it.
func (p *progress) show(frac float64, detail string) {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.started) < progressDelay || now.Sub(p.last) < progressInterval {
		return
	}
	p.last = now
	frac = min(max(frac, 0), 1)
	filled := int(frac * progressBar)
	line := fmt.Sprintf("%s [%s%s] %3.0f%% %s", p.label, strings.Repeat("#", filled), strings.Repeat(".", progressBar-filled), frac*100, detail)
	pad := max(p.width-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.width = len(line)
}

// clear blanks the bar, so what follows starts on a clean line.
func (p *progress) clear() {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
		p.width = 0
	}
}
