// Package report writes what a run found, for people: the text report
// (Text) and its JSON (JSON) from a history.Result, and the self-contained
// HTML page of a run (HTML), whose lanes, writes and faults a Timeline
// folds from the run's history through a history.Reader. It depends on
// package history alone, so it can report any runner's history, or a
// history read back from its file.
package report
