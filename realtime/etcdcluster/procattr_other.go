//go:build !linux && !windows

package etcdcluster

import (
	"os"
	"syscall"
)

// memberProcAttr puts a member in its own process group, so that a
// terminal's Ctrl-C reaches only the parent (which then ends the members
// in order); the member ends when its standard input closes.
func memberProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func stopProcess(p *os.Process) error     { return p.Signal(syscall.SIGSTOP) }
func continueProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
