package scenario

import (
	"errors"
	"strconv"
)

// ErrInvalidFile is matched (errors.Is) by every *FileError: a scenario or
// fixture file that does not parse, has unknown keys or wrong types, or
// describes a scenario out of range.
var ErrInvalidFile = errors.New("invalid scenario file")

// FileError is one problem in a file, located by line and named by the
// field as it is spelled in the file ("scenario.network.drop_replies").
// Load and friends return one FileError, or several joined with
// errors.Join, one per problem found.
type FileError struct {
	File    string // as given to the loader; "" for bytes with no name
	Line    int    // 1-based; 0 when the problem has no line (an empty file)
	Field   string // dotted path, with [i] for list entries; "" for the file as a whole
	Problem string
	// Err is the underlying error, if any: a *spec.FieldError for a
	// value out of range, a goccy/go-yaml error for bad syntax.
	Err error
}

// Error formats the problem as "file:line: field: problem", leaving out
// the parts it does not have.
func (e *FileError) Error() string {
	s := e.File
	if s == "" {
		s = "<input>"
	}
	if e.Line > 0 {
		s += ":" + strconv.Itoa(e.Line)
	}
	s += ": "
	if e.Field != "" {
		s += e.Field + ": "
	}
	return s + e.Problem
}

// Unwrap returns the underlying error, or nil.
func (e *FileError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalidFile.
func (e *FileError) Is(target error) bool { return target == ErrInvalidFile }
