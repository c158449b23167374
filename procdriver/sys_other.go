//go:build unix && !linux

package procdriver

import "syscall"

// dieWithParent does nothing where the kernel offers no parent-death
// signal: a child still ends when its stdin, the parent's pipe, closes.
func dieWithParent(*syscall.SysProcAttr) {}
