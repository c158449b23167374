// Package scratch makes the temporary directories a run keeps its
// servers' data in (etcd members, redis-server, SQLite files) so that
// they do not outlive it: each is marked with its owner, this process (its
// pid and, where the system says, its start time, so that a pid reused by
// another process is not taken for the owner), and making one first removes
// those of the same kind whose owner is dead. A run killed by SIGKILL
// cannot remove its own; the next run does.
package scratch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OwnerFile is the file in each directory that names its owner: the pid
// and the start time, on one line.
const OwnerFile = ".leasefence-owner"

// MkdirTemp is os.MkdirTemp(dir, pattern) for a directory whose owner is
// this process, after removing every directory dir holds that matches
// pattern and whose owner is dead. A directory with no owner file is left
// alone: it is no run's, or one being made.
func MkdirTemp(dir, pattern string) (string, error) {
	RemoveDead(dir, pattern)
	path, err := os.MkdirTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(path, OwnerFile), []byte(self()+"\n"), 0o600); err != nil {
		os.RemoveAll(path)
		return "", fmt.Errorf("scratch: marking %s: %w", path, err)
	}
	return path, nil
}

// RemoveDead removes the directories in dir ("" for the system's
// temporary directory) matching pattern+"*" whose owner file names a
// process that is gone, and returns the ones it removed.
func RemoveDead(dir, pattern string) []string {
	if dir == "" {
		dir = os.TempDir()
	}
	matches, _ := filepath.Glob(filepath.Join(dir, pattern+"*"))
	var removed []string
	for _, m := range matches {
		owner, err := os.ReadFile(filepath.Join(m, OwnerFile))
		if err != nil || alive(strings.TrimSpace(string(owner))) {
			continue
		}
		if err := os.RemoveAll(m); err == nil || errors.Is(err, fs.ErrNotExist) {
			removed = append(removed, m)
		}
	}
	return removed
}

// self is this process's owner mark.
func self() string { return mark(os.Getpid()) }

// mark is process pid's owner mark: "pid start", or "pid" where the start
// time cannot be read.
func mark(pid int) string {
	if start, ok := startTime(pid); ok {
		return strconv.Itoa(pid) + " " + start
	}
	return strconv.Itoa(pid)
}

// alive reports whether the process an owner mark names still runs: a
// process of that pid whose start time is the mark's. A mark it cannot
// read is taken for alive.
func alive(owner string) bool {
	pidText, start, _ := strings.Cut(owner, " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return true
	}
	if !running(pid) {
		return false
	}
	now, ok := startTime(pid)
	return !ok || start == "" || now == start
}

// startTime is process pid's start time as Linux gives it (clock ticks
// since boot, the 22nd field of /proc/PID/stat), if it can be read.
func startTime(pid int) (string, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields after it start after its last ')'.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return "", false
	}
	return fields[19], true // field 22 of the whole line
}
