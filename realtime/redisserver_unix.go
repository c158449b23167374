//go:build unix

package realtime

import (
	"os/exec"
	"syscall"
)

// terminate is the signal of an orderly stop.
var terminate = syscall.SIGTERM

// ownProcessGroup puts the server in a process group of its own, so that
// a Ctrl-C at the terminal reaches the lab alone, which then stops the
// server itself, after the run's last read of it.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
}
