package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/leasefence/lab/leasefence"
)

// ErrBadHistory is wrapped by every error about a history that cannot be
// read: a malformed line, an unknown kind, a name the header does not list.
var ErrBadHistory = errors.New("bad history")

// ErrLineTooLong is matched (errors.Is) by the refusal of a line longer
// than its bound (MaxHeaderLine, MaxEventLine), beside ErrBadHistory.
var ErrLineTooLong = errors.New("line too long")

// The longest lines a Decoder reads. A line over its bound is refused
// where the bound falls, and the rest of it is never read: a reader's
// memory stays in proportion to the header and to one event. The header
// names every agent and resource: at the scenario limits (spec.MaxAgents
// and spec.MaxResources, 100,000 each) the lab writes a header of 2.6 MB,
// which MaxHeaderLine leaves a dozen times over. No event the lab writes
// comes near a kilobyte (the longest in testdata: 212 bytes; a library's
// error in a detail is a line or two), and MaxEventLine leaves a thousand
// times that.
const (
	MaxHeaderLine = 32 << 20
	MaxEventLine  = 1 << 20
)

// LineError locates a problem in a history file.
type LineError struct {
	Path string // the file, or "" for an unnamed stream
	Line int    // 1-based
	Err  error  // wraps ErrBadHistory
}

func (e *LineError) Error() string {
	path := e.Path
	if path == "" {
		path = "history"
	}
	return fmt.Sprintf("%s:%d: %v", path, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// headerLine is the header as the file's first line spells it.
type headerLine struct {
	Kind string `json:"kind"`
	Header
}

// Encoder writes a history file: the header line when it is made, then
// one line per event. It buffers; Flush writes the rest. An Encoder is not
// safe for concurrent use.
type Encoder struct {
	w   *bufio.Writer
	h   Header
	buf []byte
	err error
}

// NewEncoder writes h as the first line of a history on w. h must be valid.
func NewEncoder(w io.Writer, h Header) (*Encoder, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	line, err := json.Marshal(headerLine{Kind: "run", Header: h})
	if err != nil {
		return nil, fmt.Errorf("history: header: %w", err)
	}
	if len(line) >= MaxHeaderLine {
		return nil, fmt.Errorf("history: a header of %d bytes: %w: the header line may be at most %d MiB", len(line), ErrLineTooLong, MaxHeaderLine>>20)
	}
	e := &Encoder{w: bufio.NewWriterSize(w, 64<<10), h: h, buf: make([]byte, 0, 256)}
	e.w.Write(line)
	e.err = e.w.WriteByte('\n')
	return e, e.err
}

// Event writes e, keeping the first error for Flush: it makes an Encoder a
// subscriber of a run.
func (e *Encoder) Event(ev Event) {
	if e.err == nil {
		e.err = e.Encode(&ev)
	}
}

// Encode writes one event line.
func (e *Encoder) Encode(ev *Event) error {
	if e.err != nil {
		return e.err
	}
	if err := e.h.CheckEvent(ev); err != nil {
		return err
	}
	agent, res := e.name(e.h.Agents, ev.Agent), e.name(e.h.Resources, ev.Resource)
	b := append(e.buf[:0], `{"at_ns":`...)
	b = strconv.AppendInt(b, int64(ev.At), 10)
	b = append(b, `,"mode":`...)
	b = appendString(b, string(ev.Mode))
	b = append(b, `,"kind":"`...)
	b = append(b, kindNames[ev.Kind]...)
	b = append(b, `","agent":`...)
	b = appendString(b, agent)
	b = append(b, `,"resource":`...)
	b = appendString(b, res)
	b = append(b, `,"fence":`...)
	b = strconv.AppendUint(b, uint64(ev.Fence), 10)
	if ev.Incarnation != 0 {
		b = append(b, `,"incarnation":`...)
		b = strconv.AppendInt(b, int64(ev.Incarnation), 10)
	}
	if ev.Other >= 0 {
		b = append(b, `,"other":`...)
		b = appendString(b, e.h.Agents[ev.Other])
	}
	if ev.OtherFence != 0 {
		b = append(b, `,"other_fence":`...)
		b = strconv.AppendUint(b, uint64(ev.OtherFence), 10)
	}
	b = appendField(b, "request", string(ev.Request))
	b = appendField(b, "request_id", ev.RequestID)
	b = appendField(b, "reason", string(ev.Reason))
	b = appendField(b, "outcome", string(ev.Outcome))
	b = appendField(b, "fault", ev.Fault)
	b = appendField(b, "target", ev.Target)
	b = appendField(b, "detail", ev.Detail)
	if ev.Dur != 0 {
		b = append(b, `,"dur_ns":`...)
		b = strconv.AppendInt(b, int64(ev.Dur), 10)
	}
	if ev.Deadline != 0 {
		b = append(b, `,"deadline_ns":`...)
		b = strconv.AppendInt(b, int64(ev.Deadline), 10)
	}
	if ev.Intervention != nil {
		iv, err := json.Marshal(ev.Intervention)
		if err != nil {
			return fmt.Errorf("history: intervention: %w", err)
		}
		b = append(b, `,"intervention":`...)
		b = append(b, iv...)
	}
	b = append(b, "}\n"...)
	e.buf = b
	if len(b) > MaxEventLine {
		// A line no Decoder would read back: refused here, not written.
		return fmt.Errorf("history: a %s event of %d bytes: %w: an event line may be at most %d MiB", ev.Kind, len(b), ErrLineTooLong, MaxEventLine>>20)
	}
	_, e.err = e.w.Write(b)
	return e.err
}

// name is participant i's name, "" for none. CheckEvent has vouched for i.
func (e *Encoder) name(names []string, i int) string {
	if i < 0 {
		return ""
	}
	return names[i]
}

// Flush writes what is buffered and returns the first error of any write.
func (e *Encoder) Flush() error {
	if e.err != nil {
		return e.err
	}
	e.err = e.w.Flush()
	return e.err
}

func appendField(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

// appendString appends v as a JSON string. Names and ids are plain ASCII in
// practice; anything else goes through encoding/json.
func appendString(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			q, _ := json.Marshal(v)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"')
}

// wireEvent is an event line as the file spells it.
type wireEvent struct {
	Kind         string            `json:"kind"`
	At           *int64            `json:"at_ns"`
	Mode         Mode              `json:"mode"`
	Agent        string            `json:"agent"`
	Resource     string            `json:"resource"`
	Fence        leasefence.Fence  `json:"fence"`
	Incarnation  int32             `json:"incarnation"`
	Other        string            `json:"other"`
	OtherFence   leasefence.Fence  `json:"other_fence"`
	Request      Request           `json:"request"`
	RequestID    string            `json:"request_id"`
	Reason       leasefence.Reason `json:"reason"`
	Outcome      Outcome           `json:"outcome"`
	Dur          int64             `json:"dur_ns"`
	Deadline     int64             `json:"deadline_ns"`
	Intervention *Intervention     `json:"intervention"`
	Fault        string            `json:"fault"`
	Target       string            `json:"target"`
	Detail       string            `json:"detail"`
}

// Decoder reads a history file line by line. Every error it returns is a
// *LineError naming the line; the header and events read before it stay
// valid.
type Decoder struct {
	r      *bufio.Reader
	path   string
	line   int
	header Header
	read   bool // the header line was read
	err    error

	agents, resources map[string]int
	modes             map[Mode]*modeState
}

type modeState struct {
	seq  uint64
	last time.Duration
}

// NewDecoder reads a history from r; path names it in errors.
func NewDecoder(r io.Reader, path string) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, 64<<10), path: path}
}

// Header reads and returns the header line.
func (d *Decoder) Header() (Header, error) {
	if d.read || d.err != nil {
		return d.header, d.err
	}
	d.read = true
	line, last, err := d.next("the header line", MaxHeaderLine)
	if err == io.EOF {
		d.err, d.line = nil, d.line+1
		return d.header, d.fail(fmt.Errorf("%w: empty file: the first line must be the run header", ErrBadHistory))
	}
	if err != nil {
		return d.header, err
	}
	var hl headerLine
	if err := json.Unmarshal(line, &hl); err != nil {
		return d.header, d.fail(jsonProblem(err, line, last))
	}
	if hl.Kind != "run" {
		return d.header, d.fail(fmt.Errorf("%w: the first line must be the run header (kind \"run\"), got kind %q", ErrBadHistory, hl.Kind))
	}
	if err := hl.Header.Validate(); err != nil {
		return d.header, d.fail(err)
	}
	d.header = hl.Header
	d.agents = indexOf(d.header.Agents)
	d.resources = indexOf(d.header.Resources)
	d.modes = make(map[Mode]*modeState, len(d.header.Modes))
	for _, m := range d.header.Modes {
		d.modes[m] = &modeState{}
	}
	return d.header, nil
}

func indexOf(names []string) map[string]int {
	m := make(map[string]int, len(names))
	for i, n := range names {
		m[n] = i
	}
	return m
}

// Next returns the next event, or io.EOF after the last.
func (d *Decoder) Next() (Event, error) {
	if _, err := d.Header(); err != nil {
		return Event{}, err
	}
	line, last, err := d.next("an event line", MaxEventLine)
	if err != nil {
		return Event{}, err
	}
	var w wireEvent
	if !fastDecode(line, &w) {
		w = wireEvent{}
		if err := json.Unmarshal(line, &w); err != nil {
			return Event{}, d.fail(jsonProblem(err, line, last))
		}
	}
	e, err := d.event(&w)
	if err != nil {
		return Event{}, d.fail(err)
	}
	return e, nil
}

func (d *Decoder) event(w *wireEvent) (Event, error) {
	kind, ok := ParseKind(w.Kind)
	if !ok {
		if w.Kind == "" {
			return Event{}, fmt.Errorf("%w: the event has no kind", ErrBadHistory)
		}
		return Event{}, fmt.Errorf("%w: unknown kind %q", ErrBadHistory, w.Kind)
	}
	if w.At == nil {
		return Event{}, fmt.Errorf("%w: %s event has no at_ns", ErrBadHistory, w.Kind)
	}
	ms, ok := d.modes[w.Mode]
	if !ok {
		return Event{}, fmt.Errorf("%w: mode %q is not one of the header's modes %v", ErrBadHistory, w.Mode, d.header.Modes)
	}
	at := time.Duration(*w.At)
	if at < ms.last {
		return Event{}, fmt.Errorf("%w: at_ns %d is before the previous %s event's %d", ErrBadHistory, at, w.Mode, ms.last)
	}
	agent, err := lookup("agent", d.agents, w.Agent)
	if err != nil {
		return Event{}, err
	}
	res, err := lookup("resource", d.resources, w.Resource)
	if err != nil {
		return Event{}, err
	}
	other, err := lookup("agent", d.agents, w.Other)
	if err != nil {
		return Event{}, err
	}
	e := Event{
		Seq: ms.seq + 1, At: at, Mode: w.Mode, Kind: kind, Agent: agent, Resource: res, Fence: w.Fence,
		Incarnation: w.Incarnation, Other: other, OtherFence: w.OtherFence, Request: w.Request,
		RequestID: w.RequestID, Reason: w.Reason, Outcome: w.Outcome, Dur: time.Duration(w.Dur),
		Deadline: time.Duration(w.Deadline), Intervention: w.Intervention, Fault: w.Fault, Target: w.Target,
		Detail: w.Detail,
	}
	if err := d.header.CheckEvent(&e); err != nil {
		return Event{}, err
	}
	ms.last = at
	ms.seq++
	return e, nil
}

func lookup(what string, index map[string]int, name string) (int, error) {
	if name == "" {
		return -1, nil
	}
	i, ok := index[name]
	if !ok {
		return -1, fmt.Errorf("%w: %s %q is not in the header", ErrBadHistory, what, name)
	}
	return i, nil
}

// next returns the next non-blank line and whether it is the last,
// unterminated one. A line longer than limit bytes (what names the line's
// kind, for the error) is refused once that many are read.
func (d *Decoder) next(what string, limit int) ([]byte, bool, error) {
	if d.err != nil {
		return nil, false, d.err
	}
	for {
		line, err := d.readLine(limit)
		if errors.Is(err, ErrLineTooLong) {
			d.line++
			return nil, false, d.fail(fmt.Errorf("%w: %w: %s may be at most %d MiB, and this one is longer; nothing after it was read",
				ErrBadHistory, err, what, limit>>20))
		}
		if len(line) == 0 && err == io.EOF {
			d.err = io.EOF
			return nil, false, io.EOF
		}
		d.line++
		if err != nil && err != io.EOF {
			return nil, false, d.fail(fmt.Errorf("%w: %v", ErrBadHistory, err))
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			return t, err == io.EOF, nil
		}
		if err == io.EOF {
			d.err = io.EOF
			return nil, false, io.EOF
		}
	}
}

// readLine reads up to and with the next newline, as bufio.Reader's
// ReadBytes, but stops with ErrLineTooLong, and reads no further, once the
// line holds more than limit bytes (its newline counted).
func (d *Decoder) readLine(limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := d.r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, ErrLineTooLong
		}
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

// fail wraps err with the current line and makes it sticky.
func (d *Decoder) fail(err error) error {
	d.err = &LineError{Path: d.path, Line: d.line, Err: err}
	return d.err
}

func jsonProblem(err error, line []byte, last bool) error {
	var syn *json.SyntaxError
	isSyntax := errors.As(err, &syn)
	// A line cut short ends its JSON early; the last line of a file
	// written by a process that died may end anywhere.
	cut := isSyntax && strings.Contains(syn.Error(), "unexpected end of JSON input")
	if bytes.HasPrefix(line, []byte("{")) && (cut || last && isSyntax) {
		return fmt.Errorf("%w: truncated line (it ends mid-object): %v", ErrBadHistory, err)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) && typ.Field != "" {
		return fmt.Errorf("%w: field %q: %v", ErrBadHistory, typ.Field, err)
	}
	return fmt.Errorf("%w: not a JSON object: %v", ErrBadHistory, err)
}

// Replay hands every event left in the history to each of subs in turn,
// in the file's order, and keeps none: a history of any length replays in
// the memory of one event. It returns how many events it handed on, the
// at_ns of the last of them (0 for none), and what stopped it: nil at the
// end of the file, or the *LineError of the first line it could not read
// (the events before it were handed on).
func (d *Decoder) Replay(subs ...Subscriber) (n int, last time.Duration, err error) {
	for {
		e, err := d.Next()
		if err == io.EOF {
			return n, last, nil
		}
		if err != nil {
			return n, last, err
		}
		for _, s := range subs {
			s.Event(e)
		}
		n++
		last = e.At
	}
}

// Decode reads a whole history. On error it returns the header and every
// event read before the bad line, with a *LineError.
func Decode(r io.Reader, path string) (Header, []Event, error) {
	d := NewDecoder(r, path)
	h, err := d.Header()
	if err != nil {
		return h, nil, err
	}
	var events []Event
	_, _, err = d.Replay(SubscriberFunc(func(e Event) { events = append(events, e) }))
	return h, events, err
}

// ReadFile reads the history file at path, as Decode.
func ReadFile(path string) (Header, []Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, nil, err
	}
	defer f.Close()
	return Decode(f, path)
}
