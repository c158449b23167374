package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/tracing"
	"github.com/leasefence/lab/tracing/otelexport"
)

// traceFlushTimeout bounds how long the command waits, after a run, for
// its spans to reach the collector: a collector that is down costs this
// much at most, and the spans it did not take are counted and reported.
const traceFlushTimeout = 10 * time.Second

// traceSink is a run's tracing: the export pipeline and the recorder that
// turns the history's events into spans.
type traceSink struct {
	pipe *otelexport.Pipeline
	rec  *tracing.Recorder
}

// startTracing sets up the pipeline cfg asks for, for the history with
// header h, or returns nil for none.
func startTracing(ctx context.Context, cfg otelexport.Config, h history.Header) (*traceSink, error) {
	if cfg.Exporter == otelexport.ExporterNone || cfg.Exporter == "" {
		return nil, nil
	}
	cfg.Attributes = append(cfg.Attributes, tracing.RunAttributes(h)...)
	pipe, err := otelexport.Setup(ctx, cfg)
	if err != nil {
		return nil, err
	}
	rec := tracing.NewRecorder(h, time.Now(), tracing.WithTracerProvider(pipe.TracerProvider()))
	return &traceSink{pipe: pipe, rec: rec}, nil
}

// finish ends every open span and flushes the pipeline, on a context of
// its own: an interrupted run still delivers the spans it made. stopped is
// the virtual instant the run stopped at: what is still open ends there.
// It says on w where the spans went and how many were lost. A nil sink
// does nothing.
func (t *traceSink) finish(w io.Writer, stopped time.Duration) {
	if t == nil {
		return
	}
	t.rec.CloseAt(stopped)
	ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
	defer cancel()
	if err := t.pipe.Shutdown(ctx); err != nil {
		fmt.Fprintf(w, "lab: trace: %v\n", err)
	}
	if n := t.pipe.Dropped(); n > 0 {
		fmt.Fprintf(w, "lab: trace: %s to %s", undelivered(n), t.pipe)
		if err := t.pipe.ExportErr(); err != nil {
			fmt.Fprintf(w, ": %v", err)
		}
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "lab: trace: sent to %s\n", t.pipe)
}

// undelivered says how many spans an exporter lost.
func undelivered(n int64) string {
	return history.Plural(n, "span was", "spans were") + " not delivered"
}
