package zklock

import (
	"os/exec"
	"syscall"
)

// procAttr puts the server in a process group of its own, so that a
// Ctrl-C at the terminal reaches the program alone, which then ends the
// server; and has the kernel kill it if the program dies first.
func procAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// kill ends the server's process group.
func kill(cmd *exec.Cmd) { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
