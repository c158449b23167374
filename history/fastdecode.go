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
	p := 0
	skip := func() {
		for p < len(line) && (line[p] == ' ' || line[p] == '\t' || line[p] == '\r' || line[p] == '\n') {
			p++
		}
	}
	str := func() (string, bool) {
		if p >= len(line) || line[p] != '"' {
			return "", false
		}
		start := p + 1
		for i := start; i < len(line); i++ {
			switch c := line[i]; {
			case c == '"':
				p = i + 1
				return string(line[start:i]), true
			case c == '\\' || c < 0x20 || c >= 0x80:
				return "", false
			}
		}
		return "", false
	}
	num := func() (int64, bool) {
		start := p
		if p < len(line) && line[p] == '-' {
			p++
		}
		digits := p
		for p < len(line) && line[p] >= '0' && line[p] <= '9' {
			p++
		}
		if p == digits || p-digits > 1 && line[digits] == '0' {
			return 0, false
		}
		v, err := strconv.ParseInt(string(line[start:p]), 10, 64)
		return v, err == nil
	}
	unsigned := func() (uint64, bool) {
		v, ok := num()
		return uint64(v), ok && v >= 0
	}
	skip()
	if p >= len(line) || line[p] != '{' {
		return false
	}
	p++
	skip()
	if p < len(line) && line[p] == '}' {
		p++
		skip()
		return p == len(line)
	}
	for {
		skip()
		key, ok := str()
		if !ok {
			return false
		}
		skip()
		if p >= len(line) || line[p] != ':' {
			return false
		}
		p++
		skip()
		switch key {
		case "kind":
			w.Kind, ok = str()
		case "mode":
			var s string
			s, ok = str()
			w.Mode = Mode(s)
		case "agent":
			w.Agent, ok = str()
		case "resource":
			w.Resource, ok = str()
		case "other":
			w.Other, ok = str()
		case "request":
			var s string
			s, ok = str()
			w.Request = Request(s)
		case "request_id":
			w.RequestID, ok = str()
		case "reason":
			var s string
			s, ok = str()
			w.Reason = leasefence.Reason(s)
		case "outcome":
			var s string
			s, ok = str()
			w.Outcome = Outcome(s)
		case "detail":
			w.Detail, ok = str()
		case "at_ns":
			var v int64
			v, ok = num()
			w.At = &v
		case "dur_ns":
			w.Dur, ok = num()
		case "deadline_ns":
			w.Deadline, ok = num()
		case "incarnation":
			var v int64
			v, ok = num()
			ok = ok && v == int64(int32(v))
			w.Incarnation = int32(v)
		case "fence":
			var v uint64
			v, ok = unsigned()
			w.Fence = leasefence.Fence(v)
		case "other_fence":
			var v uint64
			v, ok = unsigned()
			w.OtherFence = leasefence.Fence(v)
		default:
			return false
		}
		if !ok {
			return false
		}
		skip()
		if p >= len(line) {
			return false
		}
		switch line[p] {
		case ',':
			p++
			continue
		case '}':
			p++
			skip()
			return p == len(line)
		}
		return false
	}
}
