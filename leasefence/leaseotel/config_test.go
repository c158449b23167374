package leaseotel_test

import (
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/leasefence/lab/leasefence/leaseotel"
)

func TestTracerProvider(t *testing.T) {
	mine := noop.NewTracerProvider()
	if got := leaseotel.TracerProvider(leaseotel.WithTracerProvider(mine)); got != mine {
		t.Errorf("TracerProvider(WithTracerProvider(p)) = %v, want p", got)
	}
	if got := leaseotel.TracerProvider(leaseotel.WithTracerProvider(nil)); got != otel.GetTracerProvider() {
		t.Errorf("TracerProvider(WithTracerProvider(nil)) = %v, want the global provider", got)
	}
}
