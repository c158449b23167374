//go:build !unix

package redisdeploy

import (
	"errors"
	"os"
	"os/exec"
)

var errNoSignals = errors.New("pausing a process needs SIGSTOP, which this system lacks")

func procAttr(*exec.Cmd)       {}
func pause(*os.Process) error  { return errNoSignals }
func resume(*os.Process) error { return errNoSignals }

// terminate: only Kill exists here.
func terminate(p *os.Process) error { return p.Kill() }

func kill(p *os.Process) error { return p.Kill() }
