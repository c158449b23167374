package otelexport_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/leasefence/lab/harness"
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/leasefence/leaseotel"
	"github.com/leasefence/lab/spec"
	"github.com/leasefence/lab/tracing"
	"github.com/leasefence/lab/tracing/otelexport"
)

// Wiring the two packages: otelexport builds the provider, tracing's
// recorder makes the spans with it, and Shutdown delivers them.
func ExampleSetup() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "otelexport")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "gap.jsonl")

	sc, _ := spec.Builtin("gap")
	cfg, _ := otelexport.ParseExporter("file=" + path)
	cfg.Attributes = tracing.RunAttributes(sc.Header(harness.Modes))
	p, err := otelexport.Setup(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	rec := tracing.NewRecorder(sc.Header(harness.Modes), time.Now(), tracing.WithTracerProvider(p.TracerProvider()))
	_, _ = harness.Run(ctx, sc, harness.RunOptions{Subscribers: []history.Subscriber{rec}})
	rec.Close()
	if err := p.Shutdown(ctx); err != nil {
		fmt.Println(err)
	}

	out, _ := os.ReadFile(path)
	fmt.Printf("%d spans not delivered; %d line of OTLP-JSON; %d %q spans\n",
		p.Dropped(), bytes.Count(out, []byte("\n")), bytes.Count(out, []byte(`"name":"`+leaseotel.SpanLease+`"`)), leaseotel.SpanLease)
	// Output:
	// 0 spans not delivered; 1 line of OTLP-JSON; 4 "lease" spans
}

// The values of the --trace flag.
func ExampleParseExporter() {
	for _, flag := range []string{"otlp", "otlp-grpc=http://collector:4317", "file=run.jsonl", "none", "jaeger"} {
		cfg, err := otelexport.ParseExporter(flag)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: exporter %s endpoint %q path %q\n", flag, cfg.Exporter, cfg.Endpoint, cfg.Path)
	}
	// Output:
	// otlp: exporter otlp endpoint "" path ""
	// otlp-grpc=http://collector:4317: exporter otlp-grpc endpoint "http://collector:4317" path ""
	// file=run.jsonl: exporter file endpoint "" path "run.jsonl"
	// none: exporter none endpoint "" path ""
	// otelexport: bad exporter "jaeger": want otlp, otlp-http, otlp-grpc (each optionally =URL), file=PATH or none
}
