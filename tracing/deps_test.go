package tracing_test

import (
	"os/exec"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/leasefence/lab/tracing"
)

// The SDK's IDGenerator is satisfied by the API-only one.
var _ sdktrace.IDGenerator = tracing.IDGenerator{}

// A program that only instruments links the OpenTelemetry API, not the
// export pipeline: importing tracing must not pull in the SDK, an
// exporter or gRPC.
func TestInstrumentingLinksNoExportPipeline(t *testing.T) {
	// go test puts its own go command first on PATH.
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	var api bool
	for _, p := range deps {
		api = api || p == "go.opentelemetry.io/otel/trace"
		for _, banned := range []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "google.golang.org/grpc", "github.com/leasefence/lab/tracing/otelexport",
			// It reads histories: it knows no runner and no scenario model.
			"github.com/leasefence/lab/harness", "github.com/leasefence/lab/realtime", "github.com/leasefence/lab/spec"} {
			if p == banned || strings.HasPrefix(p, banned+"/") {
				t.Errorf("package tracing depends on %s", p)
			}
		}
	}
	if !api {
		t.Fatalf("go list -deps lists no go.opentelemetry.io/otel/trace among %d packages: the listing is not tracing's", len(deps))
	}
}
