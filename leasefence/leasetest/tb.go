package leasetest

import "testing"

// tb is what the suites need of a test: testing.TB and subtests. The public
// suites run on a *testing.T; the package's own tests run them on a
// recorder, to show that they fail on the broken implementations they must
// catch, which a *testing.T could only show by failing itself.
type tb interface {
	testing.TB
	// run runs f as the subtest name and reports whether it passed.
	run(name string, f func(t tb)) bool
}

// realT is a *testing.T as a tb.
type realT struct{ *testing.T }

func (t realT) run(name string, f func(t tb)) bool {
	return t.T.Run(name, func(t *testing.T) { f(realT{t}) })
}
