//go:build !unix

package realtime

import (
	"os"
	"os/exec"
)

// terminate is the signal of an orderly stop (only Kill exists here).
var terminate = os.Kill

func ownProcessGroup(*exec.Cmd) {}
