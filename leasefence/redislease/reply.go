package redislease

import (
	"fmt"
	"strconv"

	"github.com/leasefence/lab/leasefence"
)

// replyReader reads the fields of a script's reply (an array of strings and
// integers), remembering the first field that was missing or of the wrong
// shape in err, so that a caller reads every field it needs and checks once.
type replyReader struct {
	vals []any
	err  error
}

func reply(vals []any) *replyReader { return &replyReader{vals: vals} }

func (r *replyReader) fail(i int, want string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: script reply %v: field %d is not %s", ErrCorruptKey, r.vals, i, want)
	}
}

// str is field i as a string; "" (and an error) if it is none.
func (r *replyReader) str(i int) string {
	if i < len(r.vals) {
		if s, ok := r.vals[i].(string); ok {
			return s
		}
	}
	r.fail(i, "a string")
	return ""
}

// int is field i as an integer, whether Redis sent it as one or as a
// decimal string.
func (r *replyReader) int(i int) int64 {
	if i < len(r.vals) {
		switch v := r.vals[i].(type) {
		case int64:
			return v
		case string:
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	r.fail(i, "an integer")
	return 0
}

// fence is field i as a fence: a decimal integer in [1, MaxFence].
func (r *replyReader) fence(i int) leasefence.Fence {
	n := r.int(i)
	if n < 1 || leasefence.Fence(n) > MaxFence {
		r.fail(i, "a fence")
		return 0
	}
	return leasefence.Fence(n)
}

func (r *replyReader) unexpected(op string) error {
	if r.err != nil {
		return r.err
	}
	return fmt.Errorf("%w: %s script answered %v", ErrCorruptKey, op, r.vals)
}
