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

Exit status: 0 when the fenced mode held its invariants, 1 when it broke one
or the history records a library error, 2 for a file that cannot be read
(or read to its end).`

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
	h, events, readErr := history.ReadFile(pos[0])
	var lineErr *history.LineError
	if readErr != nil && (!errors.As(readErr, &lineErr) || h.Format == 0) {
		if page != nil {
			page.Close()
			os.Remove(page.Name()) // nothing to draw: leave no empty page behind
		}
		return a.badInput("check", readErr) // no header: nothing to check
	}
	res := history.Check(h, events)
	stop := report.Stop{}
	if readErr != nil {
		stop = report.Stop{Interrupted: true, By: fmt.Sprintf("line %d of the history could not be read", lineErr.Line)}
		if n := len(events); n > 0 {
			stop.At = events[n-1].At
		}
	}
	if err := a.traceHistory(ctx, tc, h, events, stop); err != nil {
		return a.badInput("check", fmt.Errorf("--trace: %w", err))
	}
	if page != nil {
		if err := writePage(page, h, events, res, stop); err != nil {
			return a.badInput("check", fmt.Errorf("--html: %w", err))
		}
		fmt.Fprintf(a.stderr, "lab check: wrote %s\n", page.Name())
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
	}
	return exitOK
}

// traceHistory sends the spans of a history read from a file where cfg
// says, if anywhere.
func (a *app) traceHistory(ctx context.Context, cfg otelexport.Config, h history.Header, events []history.Event, stop report.Stop) error {
	sink, err := startTracing(ctx, cfg, h)
	if err != nil || sink == nil {
		return err
	}
	for _, e := range events {
		sink.rec.Event(e)
	}
	stopped := h.Duration
	if stop.Interrupted {
		stopped = stop.At
	}
	sink.finish(a.stderr, stopped)
	return nil
}

// writePage draws the HTML page of a history read from a file.
func writePage(f *os.File, h history.Header, events []history.Event, res *history.Result, stop report.Stop) error {
	tl := report.NewTimeline(h)
	for _, e := range events {
		tl.Event(e)
	}
	if err := report.HTML(f, res, tl, stop); err != nil {
		return err
	}
	return f.Close()
}
