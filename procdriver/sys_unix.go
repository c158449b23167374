//go:build unix

package procdriver

import (
	"os/exec"
	"syscall"
)

// group makes the child the leader of a process group of its own: a
// terminal's Ctrl-C reaches the parent only, and the parent signals the
// child's whole group.
func group(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	dieWithParent(cmd.SysProcAttr)
}

// signal sends sig to the process group led by pid; a group that is gone
// is no error.
func signal(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pid, sig); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
	sigKill = syscall.SIGKILL
)
