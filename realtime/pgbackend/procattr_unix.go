//go:build unix

package pgbackend

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// account is a user the server runs as, other than this process's.
type account struct{ uid, gid uint32 }

// serverAccount is the account a server of the run's own runs as: nil
// (this process's) unless this process is root, whom PostgreSQL refuses
// to run as; then serverUser's.
func serverAccount() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return nil, fmt.Errorf("pgbackend: running as root, and PostgreSQL does not run as root: no user %q to run it as (%w)", serverUser, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgbackend: user %q has uid %q and gid %q", serverUser, u.Uid, u.Gid)
	}
	return &account{uid: uint32(uid), gid: uint32(gid)}, nil
}

// own gives directory dir to a, which makes the cluster in it.
func (a *account) own(dir string) error {
	if a == nil {
		return nil
	}
	return os.Chown(dir, int(a.uid), int(a.gid))
}

// procAttr runs cmd as a (nil: this process's user), in a process group
// of its own, so that a Ctrl-C at the terminal reaches the program alone,
// which then ends the server.
func procAttr(cmd *exec.Cmd, a *account) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
	if a != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: a.uid, Gid: a.gid}
	}
}

// quit asks the postmaster for an immediate shutdown.
func quit(cmd *exec.Cmd) { cmd.Process.Signal(syscall.SIGQUIT) }

// kill ends the server's process group.
func kill(cmd *exec.Cmd) { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
