package leasetest

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// recorder is a tb that records what a suite reports instead of failing
// the test that runs it: each subtest runs on a goroutine of its own, as
// under a *testing.T, and Fatal ends that goroutine. What a recorder does
// not do itself (TempDir, Setenv, ...) goes to the real test it embeds.
type recorder struct {
	testing.TB // the real test, for what is not recorded
	name       string
	parent     *recorder
	ctx        context.Context
	cancel     context.CancelFunc

	book *book // shared by the whole tree

	mu       sync.Mutex
	failed   bool
	skipped  bool
	cleanups []func()
}

// book is what a tree of recorders reports, in the order it happened.
type book struct {
	mu       sync.Mutex
	lines    []string // every line logged, prefixed with its subtest's name
	failures []string // full names of the subtests that failed
	panics   []string // full names of the subtests that panicked, with the value
}

func (b *book) add(list *[]string, s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	*list = append(*list, s)
}

func (b *book) read(list *[]string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(*list)
}

func newRecorder(t testing.TB, name string) *recorder {
	ctx, cancel := context.WithCancel(t.Context())
	return &recorder{TB: t, name: name, ctx: ctx, cancel: cancel, book: &book{}}
}

func (r *recorder) Name() string             { return r.name }
func (r *recorder) Context() context.Context { return r.ctx }
func (r *recorder) Helper()                  {}

func (r *recorder) Log(args ...any)                 { r.log(fmt.Sprintln(args...)) }
func (r *recorder) Logf(format string, args ...any) { r.log(fmt.Sprintf(format, args...)) }
func (r *recorder) Error(args ...any)               { r.log(fmt.Sprintln(args...)); r.Fail() }
func (r *recorder) Errorf(format string, args ...any) {
	r.log(fmt.Sprintf(format, args...))
	r.Fail()
}
func (r *recorder) Fatal(args ...any) { r.log(fmt.Sprintln(args...)); r.FailNow() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.log(fmt.Sprintf(format, args...))
	r.FailNow()
}
func (r *recorder) Skip(args ...any) { r.log(fmt.Sprintln(args...)); r.SkipNow() }
func (r *recorder) Skipf(format string, args ...any) {
	r.log(fmt.Sprintf(format, args...))
	r.SkipNow()
}

func (r *recorder) log(s string) {
	r.book.add(&r.book.lines, r.name+": "+strings.TrimSuffix(s, "\n"))
}

// Fail marks r and every test above it failed.
func (r *recorder) Fail() {
	for t := r; t != nil; t = t.parent {
		t.mu.Lock()
		t.failed = true
		t.mu.Unlock()
	}
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) FailNow() {
	r.Fail()
	runtime.Goexit()
}

func (r *recorder) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Skipped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *recorder) run(name string, f func(t tb)) bool {
	ctx, cancel := context.WithCancel(r.ctx)
	child := &recorder{TB: r.TB, name: r.name + "/" + name, parent: r, ctx: ctx, cancel: cancel, book: r.book}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer child.finish()
		defer func() {
			if v := recover(); v != nil {
				child.book.add(&child.book.panics, fmt.Sprintf("%s: %v", child.name, v))
				child.Fail()
			}
		}()
		f(child)
	}()
	<-done
	return !child.Failed()
}

// finish ends a subtest as testing does: its context is cancelled, then
// its cleanups run, last first.
func (r *recorder) finish() {
	r.cancel()
	r.mu.Lock()
	cleanups := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for _, f := range slices.Backward(cleanups) {
		f()
	}
	if r.Failed() {
		r.book.add(&r.book.failures, r.name)
	}
}
