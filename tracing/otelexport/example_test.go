package otelexport_test

import (
	"fmt"

	"github.com/leasefence/lab/tracing/otelexport"
)

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
