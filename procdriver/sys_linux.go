package procdriver

import "syscall"

// dieWithParent has the kernel kill the child when the parent dies, even
// by SIGKILL, which no clean-up code survives.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
