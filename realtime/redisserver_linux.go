package realtime

import "syscall"

// dieWithParent has the kernel kill the server if the lab dies without
// stopping it (SIGKILL, a crash): nothing the lab started outlives it.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
