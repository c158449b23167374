package etcdcluster

import (
	"os"
	"syscall"
)

// memberProcAttr puts a member in its own process group, so that a
// terminal's Ctrl-C reaches only the parent (which then ends the members
// in order), and has the kernel kill it if the parent dies first.
func memberProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func stopProcess(p *os.Process) error     { return p.Signal(syscall.SIGSTOP) }
func continueProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
