package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/report"
	"github.com/leasefence/lab/scenario"
	"github.com/leasefence/lab/spec"
	"github.com/leasefence/lab/tui"
)

const watchAbout = `Shows a scenario live in the terminal, naive and fenced side by side on the same
virtual clock and the same faults: the holders, each gate's floor, every agent's
lane, and the refusals as they happen. The default scenario (` + spec.DefaultScenario + `) shows a
stale write refused within its first seconds; the dashboard pauses by itself at
the first refusal, once, and says why (space resumes, n steps one event).

The scenario is a built-in name, a scenario file or a fixture file; every harness
knob can be set by a flag, as for lab run. In the dashboard: space pauses, n
steps one event, +/- change the speed, ? lists every key (stall an agent, drop
messages, restart the coordinator, toggle the gate push), q quits.

With --backend memory or etcd the agents run in real time against a real
coordinator (as lab run --backend). Such a run cannot pause, its lock servers
keep their own time: space freezes the picture while the run goes on, and the
timeline marks the interval afterwards. The drop rate, stalls and restarts
work, steps and speed do not. q or Ctrl-C ends the run, prints its report and
removes everything the run started.

When standard output is not a terminal (a pipe, CI), there is no dashboard: the
same scenario runs headless and the plain report of lab run is printed, with
lab run's exit status.`

// watch is `lab watch`, and `lab` with no command.
func (a *app) watch(ctx context.Context, args []string) int {
	fs := a.newFlagSet("watch", "[scenario|file] [flags]", watchAbout)
	var sf scenarioFlags
	sf.register(fs)
	speed := fs.Float64("speed", 1, "virtual seconds per wall second, in [0.01, 10000]")
	var mf modeFlags
	mf.register(fs, "show")
	save := fs.String("save", "", "when the dashboard closes, write the scenario with your interventions to `PATH` (replay it with lab run PATH)")
	var bf backendFlags
	bf.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return a.flagExit(fs, err)
	}
	if len(pos) > 1 {
		return a.badInput("watch", &argumentsError{takesOne: true, got: pos})
	}
	var arg string
	if len(pos) == 1 {
		arg = pos[0]
	}
	if *speed < harness.MinSpeed || *speed > harness.MaxSpeed || *speed != *speed {
		return a.badInput("watch", fmt.Errorf("--speed: must be in [%v, %v], got %v", harness.MinSpeed, harness.MaxSpeed, *speed))
	}
	if *save != "" {
		// The scenario is saved when the dashboard closes: a path that
		// cannot be written must fail now, not after the session.
		if dir := filepath.Dir(*save); !isDir(dir) {
			return a.badInput("watch", fmt.Errorf("--save: %s is not a directory", dir))
		}
	}
	cfg, err := prepareRun(arg, &sf, &bf, &mf, "none", "", "", false)
	if err != nil {
		return a.badInput("watch", err)
	}
	if cfg.real != nil {
		switch {
		case *speed != 1:
			return a.badInput("watch", fmt.Errorf("--speed: --backend %s runs in real time, at 1x", cfg.real.config.Backend))
		case *save != "":
			return a.badInput("watch", fmt.Errorf("--save: --backend %s records no interventions to replay; the simulator does", cfg.real.config.Backend))
		case bf.processes():
			return a.badInput("watch", fmt.Errorf("%s: the dashboard runs its agents in-process; lab run runs them as processes", bf.agentsAs()))
		}
	}
	// The run that reproduces this one is a lab run of the same scenario,
	// knobs and modes (watch's own flags mean nothing to run).
	cfg.command = []string{"lab", "run"}
	if arg != "" {
		cfg.command = append(cfg.command, arg)
	}
	cfg.command = append(cfg.command, sf.args()...)
	if cfg.real != nil {
		cfg.command = append(cfg.command, "--backend="+cfg.real.config.Backend)
		if bf.resource != "" {
			cfg.command = append(cfg.command, "--resource="+bf.resource)
		}
	}
	cfg.command = append(cfg.command, mf.args()...)

	if !a.stdoutTTY {
		fmt.Fprintf(a.stderr, "lab watch: standard output is not a terminal: running %s headless and printing its report.\n", cfg.sc.Name)
		code := a.execute(ctx, cfg)
		a.saveScenario(*save, cfg.sc)
		return code
	}
	if cfg.real != nil {
		return a.watchReal(ctx, cfg)
	}
	live, err := harness.NewLive(cfg.sc, cfg.modes, *speed)
	if err != nil {
		return a.badInput("watch", err)
	}
	err = a.dashboard(ctx, live)
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(a.stderr, "lab watch: %v\n", err)
		return exitFailed
	}
	a.saveScenario(*save, live.Scenario())
	// The dashboard is gone: leave the report of what ran on the terminal.
	res := live.Result()
	stop := report.Stop{Interrupted: !live.Done(), At: live.Now(), By: "the dashboard closed", Interventions: live.Scenario().Interventions}
	hd := registry.Header(cfg.sc, cfg.modes)
	report.Text(a.stdout, &hd, res, stop, report.Runner{Backend: backendSim})
	if res.Failed() {
		a.reportBug(res, commandLine(cfg.command...))
		return exitFailed
	}
	return exitOK
}

// watchReal shows a real-time run in the dashboard, which freezes its
// picture where the simulator would pause; q or Ctrl-C ends the run, after which the
// report of what ran is printed, and etcd and every temporary directory
// are gone.
func (a *app) watchReal(ctx context.Context, cfg *runConfig) int {
	rr := cfg.real
	s, err := realtime.Open(ctx, rr.config, cfg.sc)
	if err != nil {
		return a.badInput("watch", err)
	}
	rr.setup = s
	defer func() {
		if err := s.Close(); err != nil {
			fmt.Fprintf(a.stderr, "lab watch: --backend %s: %v\n", rr.config.Backend, err)
		}
	}()
	if err := s.OpenContenders(ctx, cfg.modes); err != nil {
		return a.badInput("watch", err)
	}
	live, err := s.NewLive(cfg.modes)
	if err != nil {
		return a.badInput("watch", err)
	}
	err = a.dashboard(ctx, live)
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(a.stderr, "lab watch: %v\n", err)
		return exitFailed
	}
	res := live.Result()
	if res == nil {
		return exitInterrupted // the dashboard never started the run
	}
	stop := report.Stop{Interrupted: res.Wall < s.Scenario.Duration, At: res.Wall, By: "the dashboard closed", Interventions: live.Interventions()}
	hd := live.Header() // the scenario as it ran, its times scaled
	report.Text(a.stdout, &hd, res.Result, stop, report.Runner{Backend: res.Backend, Real: rr.figures(res)})
	if res.Failed() {
		a.reportBug(res.Result, commandLine(cfg.command...))
		return exitFailed
	}
	return exitOK
}

// saveScenario writes sc, with the interventions made in the dashboard,
// as a scenario file that lab run replays; path "" saves nothing.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func (a *app) saveScenario(path string, sc spec.Scenario) {
	if path == "" {
		return
	}
	if err := os.WriteFile(path, scenario.Format(sc), 0o644); err != nil {
		fmt.Fprintf(a.stderr, "lab watch: --save: %v\n", err)
		return
	}
	fmt.Fprintf(a.stderr, "lab watch: wrote the scenario to %s; replay it with: lab run %s\n", path, shellQuote(path))
}

// runDashboard is the real dashboard: the tui package on the process's
// terminal.
func runDashboard(ctx context.Context, live tui.Source) error {
	return tui.Run(ctx, live, tui.Options{PauseAtFirstRefusal: true})
}
