//go:build !linux

package zklock

import "os/exec"

// procAttr leaves the server in the program's process group: only Linux
// kills it with the program (procattr_linux.go).
func procAttr(*exec.Cmd) {}

// kill ends the server.
func kill(cmd *exec.Cmd) { cmd.Process.Kill() }
