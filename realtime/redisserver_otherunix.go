//go:build unix && !linux

package realtime

import "syscall"

// dieWithParent: only Linux kills a child with its parent; elsewhere a lab
// killed with SIGKILL leaves its redis-server running.
func dieWithParent(*syscall.SysProcAttr) {}
