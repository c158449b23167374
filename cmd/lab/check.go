package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasefence/lab/history"
)

const checkAbout = `Checks a history file, as lab run --events writes it (or any runner that
writes the same format): the checker reads the header and the events and
nothing else, and prints the same report lab run prints (--json: the same
JSON). It needs no scenario: what the checker assumes (TTL, skew budget,
clocks, restarts) is in the file's header.

A line that cannot be read is an error naming the file and the line; the
events before it are still checked and reported, marked INCOMPLETE.

Exit status: 0 when the fenced mode held its invariants, 1 when it broke one
or the history records a library error, 2 for a file that cannot be read
(or read to its end).`

// check is `lab check`.
func (a *app) check(_ context.Context, args []string) int {
	fs := a.newFlagSet("check", "PATH [--json]", checkAbout)
	asJSON := fs.Bool("json", false, "print the JSON report instead of the text one")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 {
		return a.badInput("check", fmt.Errorf("takes one history file, got %d: %q", len(pos), pos))
	}
	h, events, readErr := history.ReadFile(pos[0])
	var lineErr *history.LineError
	if readErr != nil && (!errors.As(readErr, &lineErr) || h.Format == 0) {
		return a.badInput("check", readErr) // no header: nothing to check
	}
	res := history.Check(h, events)
	stop := stopInfo{}
	if readErr != nil {
		stop = stopInfo{interrupted: true, by: fmt.Sprintf("line %d of the history could not be read", lineErr.Line)}
		if n := len(events); n > 0 {
			stop.at = events[n-1].At
		}
	}
	if *asJSON {
		if err := writeJSONReport(a.stdout, res, stop, runInfo{backend: h.Backend}); err != nil {
			fmt.Fprintf(a.stderr, "lab check: %v\n", err)
		}
	} else {
		writeTextReport(a.stdout, h.Description, res, stop, runInfo{backend: h.Backend})
	}
	switch {
	case readErr != nil:
		return a.badInput("check", readErr)
	case res.Failed():
		a.reportBug(res, commandLine("lab", "check", pos[0]))
		return exitFailed
	}
	return exitOK
}
