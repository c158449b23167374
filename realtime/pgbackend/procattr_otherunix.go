//go:build unix && !linux

package pgbackend

import "syscall"

// dieWithParent does nothing: only Linux kills a child with its parent
// (procattr_linux.go).
func dieWithParent(*syscall.SysProcAttr) {}
