package etcdcluster

import (
	"errors"
	"os"
	"syscall"
)

// memberProcAttr: a member ends when its standard input closes.
func memberProcAttr() *syscall.SysProcAttr { return nil }

// errNoPause: Windows has no SIGSTOP, so members cannot be paused there.
var errNoPause = errors.New("pausing a process needs SIGSTOP, which Windows has not")

func stopProcess(*os.Process) error     { return errNoPause }
func continueProcess(*os.Process) error { return errNoPause }
