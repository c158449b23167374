package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/report"
	"github.com/leasefence/lab/spec"
)

// parseLockDelays reads --lock-delays: durations separated by commas,
// each one sc's lock_delay takes (sc.Validate judges it).
func parseLockDelays(s string, sc spec.Scenario) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--lock-delays: %q is not a duration (write e.g. 0,1s,2s,4s)", f)
		}
		sc.LockDelay = d
		if err := sc.Validate(); err != nil {
			return nil, fmt.Errorf("--lock-delays: %v", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// sweepLockDelays is `lab run SCENARIO --lock-delays LIST`: the scenario
// run on the simulator with each lock-delay for seeds seeds, as one table
// (and, with --html, a page of it with a plot).
func (a *app) sweepLockDelays(ctx context.Context, cfg *runConfig, delays []time.Duration, seeds int) int {
	rows, err := harness.SweepLockDelay(ctx, cfg.sc, delays, seeds, cfg.modes...)
	if err != nil {
		return a.badInput("run", err)
	}
	if cfg.html != nil {
		err := report.LockDelayHTML(cfg.html, cfg.sc.Name, seeds, cfg.sc.Duration, rows)
		if cerr := cfg.html.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "lab run: --html: %v\n", err)
			return exitFailed
		}
	}
	if cfg.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Scenario string `json:"scenario"`
			Seed     uint64 `json:"seed"`
			Seeds    int    `json:"seeds"`
			Rows     any    `json:"rows"`
		}{cfg.sc.Name, cfg.sc.Seed, seeds, rows}); err != nil {
			fmt.Fprintf(a.stderr, "lab run: %v\n", err)
			return exitFailed
		}
		return exitOK
	}
	report.LockDelayTable(a.stdout, cfg.sc.Name, seeds, cfg.sc.Duration, rows)
	return exitOK
}
