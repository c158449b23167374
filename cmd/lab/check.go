package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/report"
	"github.com/leasefence/lab/tracing/otelexport"
)

const checkAbout = `Checks a history file, as lab run --events writes it (or any runner that
writes the same format): the checker reads the header and the events and
nothing else, and prints the same report lab run prints (--json: the same
JSON). It needs no scenario: what the checker assumes (TTL, skew budget,
clocks, restarts) is in the file's header.

--html draws the page lab run --html draws, from the file alone. --trace
sends the history to OpenTelemetry as lab run --trace sends a run (one trace
per lease generation; the spans are the run's, timed from now), whichever
runner wrote it.

A line that cannot be read is an error naming the file and the line; the
events before it are still checked and reported, marked INTERRUPTED.

Exit status: 0 when nothing broke (the verdict is inconclusive, not held,
where the history left a property untested), 1 when the fenced mode broke an
invariant or made no write, a lock granted a resource while an earlier lease
on it still ran (in any mode), or the history records a library error, 2 for
a file that cannot be read (or read to its end).`

// check is `lab check`.
func (a *app) check(ctx context.Context, args []string) int {
	fs := a.newFlagSet("check", "PATH [--json] [--html PATH] [--trace EXPORTER]", checkAbout)
	asJSON := fs.Bool("json", false, "print the JSON report instead of the text one")
	htmlPath := fs.String("html", "", "also write the self-contained HTML page of the history to `PATH`")
	traceTo := fs.String("trace", "none", "send the history's trace to otlp[=URL], otlp-http[=URL], otlp-grpc[=URL], file=PATH, or none")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return a.flagExit(fs, err)
	}
	if len(pos) != 1 {
		return a.badInput("check", &argumentsError{takesOne: true, what: "history file", got: pos})
	}
	tc, err := otelexport.ParseExporter(*traceTo)
	if err != nil {
		return a.badInput("check", fmt.Errorf("--trace: %w", err))
	}
	var page *os.File
	if *htmlPath != "" {
		// Made before the file is read, so that a bad path fails first.
		f, err := os.Create(*htmlPath)
		if err != nil {
			return a.badInput("check", fmt.Errorf("--html: %w", err))
		}
		defer f.Close()
		page = f
	}
	h, res, stop, readErr, outErr := a.checkFile(ctx, pos[0], tc, page)
	var lineErr *history.LineError
	if readErr != nil && (!errors.As(readErr, &lineErr) || h.Format == 0) {
		if page != nil {
			page.Close()
			os.Remove(page.Name()) // nothing to draw: leave no empty page behind
		}
		return a.badInput("check", readErr) // no header: nothing to check
	}
	if outErr != nil {
		return a.badInput("check", outErr)
	}
	if *asJSON {
		if err := report.JSON(a.stdout, res, stop, report.Runner{Backend: h.Backend}); err != nil {
			fmt.Fprintf(a.stderr, "lab check: %v\n", err)
		}
	} else {
		report.Text(a.stdout, &h, res, stop, report.Runner{Backend: h.Backend})
	}
	switch {
	case readErr != nil:
		return a.badInput("check", readErr)
	case res.Failed():
		a.reportBug(res, commandLine("lab", "check", pos[0]))
		return exitFailed
	case res.Vacuous():
		fmt.Fprintln(a.stderr, vacuousNote("check"))
		return exitFailed
	}
	return exitOK
}

// checkFile judges the history file at path as it reads it, event by
// event, keeping no event: the checker, the trace (where tc says, if
// anywhere) and the page's timeline (if page is not nil) each fold the
// events in as they come, so a history of any length is checked in memory
// in proportion to its agents, resources and lease generations. It returns
// the header, the result, how far the file was read and the error that
// stopped the reading (the result is nil if there was no header); and
// outErr, if the trace or the page failed.
func (a *app) checkFile(ctx context.Context, path string, tc otelexport.Config, page *os.File) (h history.Header, res *history.Result, stop report.Stop, readErr, outErr error) {
	f, err := os.Open(path)
	if err != nil {
		return h, nil, stop, err, nil
	}
	defer f.Close()
	dec := history.NewDecoder(f, path)
	if h, err = dec.Header(); err != nil {
		return h, nil, stop, err, nil
	}
	checkers := history.NewCheckers(h)
	subs := []history.Subscriber{checkers}
	sink, err := startTracing(ctx, tc, h)
	if err != nil {
		return h, nil, stop, nil, fmt.Errorf("--trace: %w", err)
	}
	if sink != nil {
		subs = append(subs, sink.rec)
	}
	var tl *report.Timeline
	if page != nil {
		tl = report.NewTimeline(h)
		subs = append(subs, tl)
	}
	_, last, readErr := dec.Replay(subs...)
	res = checkers.Result()
	stopped := h.Duration
	var lineErr *history.LineError
	if errors.As(readErr, &lineErr) {
		stop = report.Stop{Interrupted: true, By: fmt.Sprintf("line %d of the history could not be read", lineErr.Line), At: last}
		stopped = last
	}
	sink.finish(a.stderr, stopped)
	if page != nil {
		err := report.HTML(page, res, tl, stop)
		if err == nil {
			err = page.Close()
		}
		if err != nil {
			return h, res, stop, readErr, fmt.Errorf("--html: %w", err)
		}
		fmt.Fprintf(a.stderr, "lab check: wrote %s\n", page.Name())
	}
	return h, res, stop, readErr, nil
}
