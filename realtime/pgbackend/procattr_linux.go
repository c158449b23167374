package pgbackend

import "syscall"

// dieWithParent has the kernel kill the postmaster if the program that
// started it dies without ending it (SIGKILL, a crash); its children then
// exit by themselves, seeing it gone.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
