//go:build !unix

package pgbackend

import "os/exec"

// account is a user the server runs as: only a Unix system runs it as
// another (procattr_unix.go).
type account struct{}

// serverAccount is nil: the server runs as this process's user.
func serverAccount() (*account, error) { return nil, nil }

func (*account) own(string) error { return nil }

// procAttr leaves the server in the program's process group, as its
// user.
func procAttr(*exec.Cmd, *account) {}

// quit kills the postmaster: the system has no signal for an immediate
// shutdown.
func quit(cmd *exec.Cmd) { cmd.Process.Kill() }

// kill ends the server.
func kill(cmd *exec.Cmd) { cmd.Process.Kill() }
