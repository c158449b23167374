package redisdeploy

import "syscall"

// dieWithParent has the kernel kill the server if the process that started
// it dies without ending it (SIGKILL, a crash): nothing outlives it.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
