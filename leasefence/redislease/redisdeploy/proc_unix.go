//go:build unix

package redisdeploy

import (
	"os"
	"os/exec"
	"syscall"
)

// procAttr puts the server in a process group of its own, so that a
// Ctrl-C at the terminal reaches the program alone, which then ends the
// server itself.
func procAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
}

func pause(p *os.Process) error     { return p.Signal(syscall.SIGSTOP) }
func resume(p *os.Process) error    { return p.Signal(syscall.SIGCONT) }
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }

// kill ends the server's whole process group: a child it forked (an
// append-only file rewrite, a snapshot) would otherwise go on writing into
// its directory after it died, until it noticed.
func kill(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }
