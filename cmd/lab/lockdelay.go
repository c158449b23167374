package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
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
// run with each lock-delay for seeds seeds, on the simulator or the real
// backend of --backend, as one table (and, with --html, a page of it with
// a plot).
func (a *app) sweepLockDelays(ctx context.Context, cfg *runConfig, delays []time.Duration, seeds int) int {
	run := func(ctx context.Context, sc spec.Scenario) (*history.Result, error) {
		return harness.Run(ctx, sc, harness.RunOptions{Modes: cfg.modes})
	}
	title, backend := cfg.sc.Name, backendSim
	if cfg.real != nil {
		backend = cfg.real.config.Backend
		run, title = a.realSweepRun(cfg), title+" on "+backend
	}
	rows, err := harness.SweepLockDelay(ctx, cfg.sc, delays, seeds, run)
	if err != nil {
		return a.badInput("run", err)
	}
	if cfg.html != nil {
		err := report.LockDelayHTML(cfg.html, title, seeds, cfg.sc.Duration, rows)
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
			Backend  string `json:"backend"`
			Seed     uint64 `json:"seed"`
			Seeds    int    `json:"seeds"`
			Rows     any    `json:"rows"`
		}{cfg.sc.Name, backend, cfg.sc.Seed, seeds, rows}); err != nil {
			fmt.Fprintf(a.stderr, "lab run: %v\n", err)
			return exitFailed
		}
		return exitOK
	}
	report.LockDelayTable(a.stdout, title, seeds, cfg.sc.Duration, rows)
	return exitOK
}

// realSweepRun runs one scenario of a sweep on cfg's real backend, on a
// setup of its own, closed once it ran.
func (a *app) realSweepRun(cfg *runConfig) harness.SweepRun {
	return func(ctx context.Context, sc spec.Scenario) (*history.Result, error) {
		rr := &realRun{config: cfg.real.config, agents: cfg.real.agents, onSetup: a.onSetup}
		if err := rr.open(ctx, sc, cfg.modes, nil); err != nil {
			return nil, err
		}
		defer rr.close(a.stderr, cmp.Or(a.closeLimit, closeAfterStuck))
		res, err := rr.run(ctx)
		if res == nil {
			return nil, err
		}
		return res.Result, err
	}
}
