//go:build unix

package scratch

import (
	"errors"
	"syscall"
)

// running reports whether a process of that pid exists (signal 0 reaches
// it, or it is another user's).
func running(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
