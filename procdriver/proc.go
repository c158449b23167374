package procdriver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// proc is one agent's process in one mode.
type proc struct {
	mode   history.Mode
	agent  int
	life   int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tail
	ready  chan struct{} // closed once it wrote its header: it can start
	exited chan struct{} // closed once the process has been waited for

	mu     sync.Mutex
	killed bool
}

func (p *proc) name() string {
	return fmt.Sprintf("%s (%s, process %d)", spec.AgentName(p.agent), p.mode, p.life+1)
}

// startProc starts the life-th process of agent ai in mode m, and the
// goroutine that reads what it reports.
func (r *Runner) startProc(m history.Mode, ai, life int, scripted bool) error {
	cfg, err := encodeConfig(r.childConfig(m, ai, life, scripted))
	if err != nil {
		return err
	}
	p := &proc{mode: m, agent: ai, life: life, stderr: &tail{}, ready: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.Command(r.opts.Command[0], r.opts.Command[1:]...)
	group(p.cmd)
	p.cmd.Stderr = p.stderr
	if r.opts.Stderr != nil {
		p.cmd.Stderr = io.MultiWriter(p.stderr, r.opts.Stderr)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		return nil // the run is over: no new process
	}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("procdriver: starting %s: %w", p.name(), err)
	}
	r.procs = append(r.procs, p)
	r.stats[m].Started++
	if _, err := p.stdin.Write(cfg); err != nil {
		return fmt.Errorf("procdriver: configuring %s: %w", p.name(), err)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.read(p, out)
		err := p.cmd.Wait()
		p.stdin.Close()
		close(p.exited)
		if err != nil && !p.wasKilled() && r.ctx.Err() == nil {
			r.fail(fmt.Errorf("procdriver: %s failed: %v%s", p.name(), err, p.stderr.String()))
		}
	}()
	return nil
}

// read takes what p reports until its stream ends: its events, its
// writes' announcements, and its stalls, which the parent turns into
// pauses of the whole process.
func (r *Runner) read(p *proc, out io.Reader) {
	dec := history.NewDecoder(out, p.name())
	if _, err := dec.Header(); err != nil {
		if !p.wasKilled() && !errors.Is(err, io.EOF) && r.ctx.Err() == nil {
			r.fail(fmt.Errorf("procdriver: %s: %w", p.name(), err))
		}
		io.Copy(io.Discard, out)
		return
	}
	close(p.ready)
	select {
	case <-r.begun:
		if err := writeStart(p.stdin, r.start); err != nil && !p.wasKilled() {
			r.fail(fmt.Errorf("procdriver: starting %s: %w", p.name(), err))
		}
	case <-r.ctx.Done():
	}
	for {
		e, err := dec.Next()
		if err != nil {
			if err != io.EOF && !p.wasKilled() {
				// A killed process may have been cut mid-line; anything
				// else is a bad report.
				r.fail(fmt.Errorf("procdriver: %s: %w", p.name(), err))
			}
			io.Copy(io.Discard, out)
			return
		}
		r.record(e, p.life)
		if e.Kind == history.StallBegan {
			r.pause(p, e)
		}
	}
}

// pause stops p's whole process group for the stall e announces, and lets
// the child go on once it is stopped: it reads the word only when it is
// continued, after the stall's length.
func (r *Runner) pause(p *proc, e history.Event) {
	defer p.stdin.Write([]byte("\n"))
	if r.ctx.Err() != nil || e.Dur <= 0 {
		return
	}
	if err := signal(p.cmd.Process.Pid, sigStop); err != nil {
		r.fail(fmt.Errorf("procdriver: pausing %s: %w", p.name(), err))
		return
	}
	r.mu.Lock()
	r.stats[p.mode].Paused++
	r.mu.Unlock()
	sleep(r.ctx, e.Dur)
	if err := signal(p.cmd.Process.Pid, sigCont); err != nil {
		r.fail(fmt.Errorf("procdriver: continuing %s: %w", p.name(), err))
	}
}

// record takes one event of a mode's history (a child's report, or a
// crash the parent played), and hands it to the live subscribers.
func (r *Runner) record(e history.Event, life int) {
	r.mu.Lock()
	e, err := r.reports[e.Mode].add(e, life)
	r.mu.Unlock()
	if err != nil {
		r.fail(err)
	}
	r.liveMu.Lock()
	for _, s := range r.opts.Live {
		s.Event(e)
	}
	r.liveMu.Unlock()
}

// recordFault records fault event e (a crash's began or ended, a fault of
// the backend's servers) in every mode, now.
func (r *Runner) recordFault(e history.Event) {
	at := r.now()
	for _, m := range r.h.Modes {
		e.Mode, e.At = m, at
		r.record(e, 0) // of no lease: its life numbers nothing
	}
}

// kill kills agent ai's process in every mode, and returns the life of
// each it killed, by mode.
func (r *Runner) kill(ai int) map[history.Mode]int {
	lives := make(map[history.Mode]int)
	for _, p := range r.procList() {
		if p.agent != ai || !p.kill() {
			continue
		}
		<-p.exited
		r.mu.Lock()
		r.stats[p.mode].Killed++
		r.mu.Unlock()
		lives[p.mode] = p.life
	}
	return lives
}

// killAll kills every process still running.
func (r *Runner) killAll() {
	for _, p := range r.procList() {
		p.kill()
	}
	for _, p := range r.procList() {
		<-p.exited
	}
}

// kill sends SIGKILL to p's group, once, if it still runs; it reports
// whether it did.
func (p *proc) kill() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.exited:
		return false
	default:
	}
	if p.killed {
		return false
	}
	p.killed = true
	signal(p.cmd.Process.Pid, sigKill)
	return true
}

func (p *proc) wasKilled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed
}

// tail keeps the end of what a child wrote to its stderr.
type tail struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

const tailBytes = 2048

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(b)
	if over := t.buf.Len() - tailBytes; over > 0 {
		t.buf.Next(over)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.buf.Len() == 0 {
		return ""
	}
	return "; its stderr ends: " + t.buf.String()
}
