//go:build unix && !linux

package redisdeploy

import "syscall"

// dieWithParent: only Linux kills a child with its parent; elsewhere a
// program killed with SIGKILL leaves its servers running.
func dieWithParent(*syscall.SysProcAttr) {}
