package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
// Linux counts in a child's ru_maxrss the memory of the process it was
// started from, up to its exec (os/exec starts it sharing the parent's
// memory): a child of this benchmark process, grown by the benchmarks
// before it (the simulator's to 130 MB), reports this process's peak, not
// its own. So lab runs as a grandchild, through this test binary started
// afresh (rssChild), which is small when it starts lab and reports lab's
// rusage alone.
func BenchmarkRunPeakRSS(b *testing.B) {
	lab := buildLab(b)
	for _, mode := range []string{"naive", "fenced"} {
		for _, d := range rssDurations {
			b.Run("mode="+mode+"/duration="+d, func(b *testing.B) {
				var peakKB int64
				for b.Loop() {
					cmd := exec.Command(os.Args[0], "-test.run", "^TestRSSChild$")
					cmd.Env = append(os.Environ(), rssChildEnv+"="+strings.Join([]string{lab, "run", "crowd", "--agents", "1000",
						"--resources", "100", "--duration", d, "--mode", mode, "--json"}, "\x1f"))
					out, err := cmd.Output()
					if err != nil {
						b.Fatalf("%v: %v", cmd.Args, err)
					}
					var kb int64
					if _, err := fmt.Sscanf(string(out), "maxrss %d", &kb); err != nil {
						b.Fatalf("the child said %q: %v", out, err)
					}
					peakKB = max(peakKB, kb) // kilobytes on Linux
				}
				b.ReportMetric(float64(peakKB)/1024, "peak-rss-MB")
			})
		}
	}
}

// rssChildEnv names, for TestRSSChild, the command to run: its arguments
// joined by the unit separator (0x1f).
const rssChildEnv = "BENCH_RSS_CHILD"

// TestRSSChild is BenchmarkRunPeakRSS's intermediate process: run as a
// fresh process with rssChildEnv set, it runs the command and prints
// "maxrss N", the command's peak resident memory in kilobytes. Without the
// variable it does nothing.
func TestRSSChild(t *testing.T) {
	spec := os.Getenv(rssChildEnv)
	if spec == "" {
		t.Skip("run by BenchmarkRunPeakRSS")
	}
	args := strings.Split(spec, "\x1f")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Skip("no rusage for a child process here")
	}
	fmt.Printf("maxrss %d\n", ru.Maxrss)
	os.Exit(0) // nothing of the test framework's on stdout after it
}
