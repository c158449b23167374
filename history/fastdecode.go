package history

import (
	"strconv"

	"github.com/leasefence/lab/leasefence"
)

// fastDecode reads an event line the way an Encoder writes it: one flat
// object of known keys with plain string and integer values. It reports
// false for anything else (an escape, a nested object, a float, null, an
// unknown key, malformed JSON), and the caller then reads the line with
// encoding/json, whose result and errors stand. It exists because a
// history has millions of lines and reflection costs most of reading one.
func fastDecode(line []byte, w *wireEvent) bool {
	*w = wireEvent{}
	s := scanner{line: line}
	s.skip()
	if !s.eat('{') {
		return false
	}
	s.skip()
	if s.eat('}') {
		return s.end()
	}
	for {
		s.skip()
		key, ok := s.str()
		if !ok {
			return false
		}
		s.skip()
		if !s.eat(':') {
			return false
		}
		s.skip()
		if !s.field(key, w) {
			return false
		}
		s.skip()
		switch {
		case s.eat(','):
		case s.eat('}'):
			return s.end()
		default:
			return false
		}
	}
}

// scanner reads one line of JSON from p on.
type scanner struct {
	line []byte
	p    int
}

func (s *scanner) skip() {
	for s.p < len(s.line) {
		switch s.line[s.p] {
		case ' ', '\t', '\r', '\n':
			s.p++
		default:
			return
		}
	}
}

// eat consumes c if it comes next.
func (s *scanner) eat(c byte) bool {
	if s.p < len(s.line) && s.line[s.p] == c {
		s.p++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (s *scanner) end() bool {
	s.skip()
	return s.p == len(s.line)
}

// str reads a string with no escapes and only printable ASCII.
func (s *scanner) str() (string, bool) {
	if !s.eat('"') {
		return "", false
	}
	start := s.p
	for i := start; i < len(s.line); i++ {
		switch c := s.line[i]; {
		case c == '"':
			s.p = i + 1
			return string(s.line[start:i]), true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", false
		}
	}
	return "", false
}

// num reads an integer as JSON spells one: no leading zeros, no fraction.
func (s *scanner) num() (int64, bool) {
	start := s.p
	s.eat('-')
	digits := s.p
	for s.p < len(s.line) && s.line[s.p] >= '0' && s.line[s.p] <= '9' {
		s.p++
	}
	if s.p == digits || s.p-digits > 1 && s.line[digits] == '0' {
		return 0, false
	}
	v, err := strconv.ParseInt(string(s.line[start:s.p]), 10, 64)
	return v, err == nil
}

func (s *scanner) unsigned() (uint64, bool) {
	v, ok := s.num()
	return uint64(v), ok && v >= 0
}

// field reads the value of key into w.
func (s *scanner) field(key string, w *wireEvent) (ok bool) {
	switch key {
	case "kind":
		w.Kind, ok = s.str()
	case "mode":
		var v string
		v, ok = s.str()
		w.Mode = Mode(v)
	case "agent":
		w.Agent, ok = s.str()
	case "resource":
		w.Resource, ok = s.str()
	case "other":
		w.Other, ok = s.str()
	case "request":
		var v string
		v, ok = s.str()
		w.Request = Request(v)
	case "request_id":
		w.RequestID, ok = s.str()
	case "reason":
		var v string
		v, ok = s.str()
		w.Reason = leasefence.Reason(v)
	case "outcome":
		var v string
		v, ok = s.str()
		w.Outcome = Outcome(v)
	case "detail":
		w.Detail, ok = s.str()
	case "fault":
		w.Fault, ok = s.str()
	case "target":
		w.Target, ok = s.str()
	default:
		return s.numberField(key, w)
	}
	return ok
}

// numberField reads the value of an integer key into w.
func (s *scanner) numberField(key string, w *wireEvent) (ok bool) {
	switch key {
	case "at_ns":
		var v int64
		v, ok = s.num()
		w.At = &v
	case "dur_ns":
		w.Dur, ok = s.num()
	case "deadline_ns":
		w.Deadline, ok = s.num()
	case "incarnation":
		var v int64
		v, ok = s.num()
		ok = ok && v == int64(int32(v))
		w.Incarnation = int32(v)
	case "fence":
		var v uint64
		v, ok = s.unsigned()
		w.Fence = leasefence.Fence(v)
	case "other_fence":
		var v uint64
		v, ok = s.unsigned()
		w.OtherFence = leasefence.Fence(v)
	default:
		return false
	}
	return ok
}
