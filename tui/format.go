package tui

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/leasefence/lab/leasefence"
)

// fmtSpeed is a pace as a multiple of wall time: "1x", "0.5x", "0.0156x".
func fmtSpeed(x float64) string {
	return strconv.FormatFloat(x, 'g', 3, 64) + "x"
}

// holderAt is "agent-2@7", or "-" for a gate that has admitted nothing.
func holderAt(holder string, f leasefence.Fence) string {
	switch {
	case holder == "" && f == 0:
		return "-"
	case holder == "":
		return fmt.Sprintf("initial@%d", f)
	}
	return fmt.Sprintf("%s@%d", holder, f)
}

// fit cuts every line of s to width cells and pads or cuts s to exactly
// height lines, so a pane never spills into its neighbours.
func fit(s string, width, height int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > height {
		lines = lines[:height]
	}
	for i, l := range lines {
		if ansi.StringWidth(l) > width {
			lines[i] = ansi.Truncate(l, width, "…")
		}
	}
	for len(lines) < height {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// cut truncates one line to width cells.
func cut(s string, width int) string {
	if ansi.StringWidth(s) > width {
		return ansi.Truncate(s, width, "…")
	}
	return s
}

// longest is the length of the longest of names.
func longest(names []string) int {
	n := 0
	for _, s := range names {
		n = max(n, len(s))
	}
	return n
}
