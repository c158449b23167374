package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/leasefence/lab/internal/peakrss"
)

// buildLab builds cmd/lab into a temporary directory, once per benchmark.
func buildLab(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "lab")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/leasefence/lab/cmd/lab").CombinedOutput()
	if err != nil {
		b.Fatalf("go build ./cmd/lab: %v\n%s", err, out)
	}
	return bin
}

// rssDurations are the short run and the run ten times as long of the RSS
// target: memory should not grow with a run's length.
var rssDurations = []string{"30s", "300s"}

// BenchmarkRunPeakRSS is the peak resident memory of `lab run crowd
// --agents 1000 --resources 100` as a child process, in each mode, for 30
// and 300 virtual seconds: the longer run's peak should stay within 1.3x of
// the shorter's. It reports peak-rss-MB (the kernel's high-water mark of the
// child, ru_maxrss) and events/op; compare the durations with
//
//	benchstat -filter .name:RunPeakRSS -col /duration new.txt
//
// lab runs as a grandchild of this process (peakrss), so that the memory
// the benchmarks before it grew this process to (the simulator's, 130 MB)
// is not counted in lab's.
func BenchmarkRunPeakRSS(b *testing.B) {
	lab := buildLab(b)
	for _, mode := range []string{"naive", "fenced"} {
		for _, d := range rssDurations {
			b.Run("mode="+mode+"/duration="+d, func(b *testing.B) {
				var peakKB int64
				for b.Loop() {
					kb, err := peakrss.Of(nil, lab, "run", "crowd", "--agents", "1000",
						"--resources", "100", "--duration", d, "--mode", mode, "--json")
					if err != nil {
						b.Fatal(err)
					}
					peakKB = max(peakKB, kb) // kilobytes on Linux
				}
				b.ReportMetric(float64(peakKB)/1024, "peak-rss-MB")
			})
		}
	}
}

// TestMain lets this test binary be peakrss's intermediate process.
func TestMain(m *testing.M) {
	peakrss.ServeIfAsked()
	os.Exit(m.Run())
}
