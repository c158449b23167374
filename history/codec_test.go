package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testHeader() Header {
	return Header{
		Format: FormatVersion, Scenario: "test", Seed: 7, Backend: "sim", Modes: []Mode{Naive, Fenced},
		Duration: 3 * time.Second, Agents: []string{"agent-1", "agent-2"}, Resources: []string{"res-1"},
		TTL: time.Second, ClockSkew: 10 * time.Millisecond,
		Clocks:   Clocks{DriftPPMMin: -100, DriftPPMMax: 50, WithinBudget: true},
		Restarts: []Restart{{At: 2 * time.Second, Persist: true}},
	}
}

// everyKind is one event of each kind, with every field in use somewhere.
func everyKind() []Event {
	var events []Event
	for i, k := range Kinds() {
		e := Event{Seq: uint64(i + 1), At: time.Duration(i) * time.Millisecond, Mode: Fenced, Kind: k,
			Agent: i % 2, Resource: 0, Fence: 3, Incarnation: int32(i % 3), Other: -1}
		switch k {
		case RequestSent:
			e.Request, e.RequestID, e.Dur = RequestAcquire, "r-1", 2*time.Millisecond
		case Denied:
			e.Reason, e.Other, e.Dur = "held", 1, 300*time.Millisecond
		case CommitRefused:
			e.Other, e.OtherFence = 1, 4
		case LeaseAbandoned:
			e.Outcome = OutcomeCheckFailed
		case Acquired, Renewed, Granted, Extended, Expired:
			e.Deadline = -5 * time.Millisecond // a belief can end before 0 on a clock far behind
		case CoordinatorRestarted:
			e.Agent, e.Resource, e.Outcome = -1, -1, OutcomeCounterLost
		case Intervened:
			e.Intervention = &Intervention{At: e.At, Kind: StallAgent, Agent: "agent-1", Duration: time.Second, Value: 0.5, Persist: true}
		case FaultBegan:
			e.Agent, e.Resource, e.Fault, e.Target, e.Dur, e.Detail = -1, -1, "partition_member", "etcd member 2 (the leader)", time.Second, "traffic delayed 200ms"
		case FaultEnded:
			e.Resource, e.Fault = -1, "partition"
		}
		events = append(events, e)
	}
	return events
}

func encode(t testing.TB, h Header, events []Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc, err := NewEncoder(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	for i := range events {
		enc.Event(events[i])
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTripEveryKind(t *testing.T) {
	h, events := testHeader(), everyKind()
	data := encode(t, h, events)
	got, gotEvents, err := Decode(bytes.NewReader(data), "t.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Errorf("header: got %+v, want %+v", got, h)
	}
	if !reflect.DeepEqual(gotEvents, events) {
		for i := range min(len(events), len(gotEvents)) {
			if !reflect.DeepEqual(gotEvents[i], events[i]) {
				t.Fatalf("event %d (%v): got %+v, want %+v", i, events[i].Kind, gotEvents[i], events[i])
			}
		}
		t.Fatalf("got %d events, want %d", len(gotEvents), len(events))
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n")[1:] {
		for _, field := range []string{`"at_ns":`, `"mode":`, `"kind":`, `"agent":`, `"resource":`, `"fence":`} {
			if !strings.Contains(line, field) {
				t.Errorf("line %s lacks %s", line, field)
			}
		}
	}
}

func TestKindNames(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds() {
		name := k.String()
		if name == "unknown" || name == "" || strings.ContainsAny(name, "- ") || strings.ToLower(name) != name {
			t.Errorf("kind %d has name %q: want snake_case", k, name)
		}
		if seen[name] {
			t.Errorf("kind name %q twice", name)
		}
		seen[name] = true
		if back, ok := ParseKind(name); !ok || back != k {
			t.Errorf("ParseKind(%q) = %v, %v", name, back, ok)
		}
	}
	for _, want := range []string{"acquired", "renewed", "released", "expired", "check_passed", "stall_began",
		"stall_ended", "commit_admitted", "commit_refused", "write_landed", "acquire_abandoned", "lease_abandoned"} {
		if !seen[want] {
			t.Errorf("no kind %q", want)
		}
	}
}

func TestUnknownFieldsIgnored(t *testing.T) {
	data := string(encode(t, testHeader(), nil))
	data = strings.Replace(data, `{"kind":"run",`, `{"kind":"run","future":{"x":[1,2]},`, 1)
	data += `{"at_ns":5,"mode":"naive","kind":"check_passed","agent":"agent-2","resource":"res-1","fence":2,"color":"red"}` + "\n"
	_, events, err := Decode(strings.NewReader(data), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Agent != 1 || events[0].Kind != CheckPassed || events[0].Fence != 2 {
		t.Fatalf("got %+v", events)
	}
}

func TestBadLines(t *testing.T) {
	good := `{"at_ns":1,"mode":"fenced","kind":"check_passed","agent":"agent-1","resource":"res-1","fence":1}` + "\n"
	head := string(encode(t, testHeader(), nil))
	for _, tc := range []struct {
		name, tail string
		line, kept int
		want       string
	}{
		{"truncated", good + good + `{"at_ns":3,"mode":"fen`, 4, 2, "truncated line"},
		{"truncated mid-file", good + `{"at_ns":3,"mode":"fen` + "\n" + good, 3, 1, "truncated line"},
		{"unknown kind", good + `{"at_ns":2,"mode":"fenced","kind":"teleported","agent":"agent-1","resource":"res-1","fence":1}` + "\n" + good, 3, 1, `unknown kind "teleported"`},
		{"not JSON", good + "hello there\n", 3, 1, "not a JSON object"},
		{"not JSON at the end", good + "hello", 3, 1, "not a JSON object"},
		{"no kind", `{"at_ns":2,"mode":"fenced"}` + "\n", 2, 0, "no kind"},
		{"no time", `{"mode":"fenced","kind":"acquired"}` + "\n", 2, 0, "no at_ns"},
		{"unknown agent", good + `{"at_ns":2,"mode":"fenced","kind":"acquired","agent":"agent-9","resource":"res-1","fence":1}` + "\n", 3, 1, `agent "agent-9" is not in the header`},
		{"unknown resource", `{"at_ns":2,"mode":"fenced","kind":"acquired","agent":"agent-1","resource":"res-0","fence":1}` + "\n", 2, 0, `resource "res-0"`},
		{"unknown mode", `{"at_ns":2,"mode":"reckless","kind":"acquired","agent":"agent-1","resource":"res-1","fence":1}` + "\n", 2, 0, `mode "reckless"`},
		{"time goes back", `{"at_ns":9,"mode":"fenced","kind":"check_passed","agent":"agent-1","resource":"res-1"}` + "\n" + good, 3, 1, "before the previous"},
		{"negative fence", `{"at_ns":2,"mode":"fenced","kind":"acquired","agent":"agent-1","resource":"res-1","fence":-1}` + "\n", 2, 0, `field "fence"`},
		{"landed write names no agent", good + `{"at_ns":2,"mode":"fenced","kind":"commit_admitted","agent":"","resource":"res-1","fence":1}` + "\n", 3, 1, "commit_admitted event names no agent"},
		{"landed write has no agent key", good + `{"at_ns":2,"mode":"fenced","kind":"commit_admitted","resource":"res-1","fence":1}` + "\n", 3, 1, "commit_admitted event names no agent"},
		{"landed write names no resource", `{"at_ns":2,"mode":"naive","kind":"write_landed","agent":"agent-1","fence":1}` + "\n", 2, 0, "write_landed event names no resource"},
		{"grant names no agent", `{"at_ns":2,"mode":"fenced","kind":"granted","resource":"res-1","fence":1}` + "\n", 2, 0, "granted event names no agent"},
		{"acquire names no resource", `{"at_ns":2,"mode":"fenced","kind":"acquired","agent":"agent-1","fence":1}` + "\n", 2, 0, "acquired event names no resource"},
		{"refusal names an unknown floor holder", `{"at_ns":2,"mode":"fenced","kind":"commit_refused","agent":"agent-1","resource":"res-1","fence":1,"other":"agent-7"}` + "\n", 2, 0, `agent "agent-7" is not in the header`},
		{"fault names no kind", good + `{"at_ns":2,"mode":"fenced","kind":"fault_began","agent":"agent-1","dur_ns":5}` + "\n", 3, 1, "fault_began event names no fault kind"},
		{"fault names no one", `{"at_ns":2,"mode":"fenced","kind":"fault_ended","fault":"pause_leader"}` + "\n", 2, 0, "neither an agent nor a target"},
		{"blank lines counted", "\n\n" + `{"at_ns":2}` + "\n", 4, 0, "no kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, events, err := Decode(strings.NewReader(head+tc.tail), "h.jsonl")
			var le *LineError
			if !errors.As(err, &le) || !errors.Is(err, ErrBadHistory) {
				t.Fatalf("got %v, want a *LineError wrapping ErrBadHistory", err)
			}
			if le.Line != tc.line || le.Path != "h.jsonl" {
				t.Errorf("error at %s:%d, want h.jsonl:%d: %v", le.Path, le.Line, tc.line, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "h.jsonl:") {
				t.Errorf("error %q, want h.jsonl:%d: ...%s...", err, tc.line, tc.want)
			}
			if len(events) != tc.kept || h.Scenario != "test" {
				t.Errorf("kept %d events and header %q, want %d and the header", len(events), h.Scenario, tc.kept)
			}
		})
	}
}

func TestBadHeader(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"empty", "", "empty file"},
		{"event first", `{"at_ns":1,"mode":"fenced","kind":"acquired"}` + "\n", `kind "run"`},
		{"not JSON", "# history\n", "not a JSON object"},
		{"old format", `{"kind":"run","format":0,"scenario":"x","modes":["fenced"],"ttl_ns":1,"resources":["r"]}` + "\n", "format 0"},
		{"format 1", `{"kind":"run","format":1,"scenario":"x","modes":["fenced"],"ttl_ns":1,"resources":["r"]}` + "\n",
			"format 1, written by a lab before the fault events"},
		{"no ttl", `{"kind":"run","format":2,"scenario":"x","modes":["fenced"],"resources":["r"]}` + "\n", "ttl_ns"},
		{"bad mode", `{"kind":"run","format":2,"scenario":"x","modes":["safe"],"ttl_ns":1,"resources":["r"]}` + "\n", `mode "safe"`},
		{"twice", `{"kind":"run","format":2,"scenario":"x","modes":["fenced"],"ttl_ns":1,"resources":["r","r"]}` + "\n", `"r" twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Decode(strings.NewReader(tc.data), "h.jsonl")
			var le *LineError
			if !errors.As(err, &le) || le.Line != 1 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want h.jsonl:1: ...%s...", err, tc.want)
			}
			if old := errors.Is(err, ErrOldFormat); old != (tc.name == "format 1") || !errors.Is(err, ErrBadHistory) {
				t.Errorf("%v: errors.Is ErrOldFormat %v, ErrBadHistory %v", err, old, errors.Is(err, ErrBadHistory))
			}
		})
	}
}

func TestEncoderRefusesMissingOrUnknownParticipants(t *testing.T) {
	enc, err := NewEncoder(io.Discard, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(&Event{Kind: Acquired, Mode: Fenced, Agent: 5, Resource: 0, Other: -1}); !errors.Is(err, ErrBadHistory) {
		t.Fatalf("agent 5 of 2: got %v", err)
	}
	if err := enc.Encode(&Event{Kind: CommitAdmitted, Mode: Fenced, Agent: -1, Resource: 0, Other: -1}); !errors.Is(err, ErrBadHistory) {
		t.Fatalf("a landed write of no agent: got %v", err)
	}
	if _, err := NewEncoder(io.Discard, Header{}); !errors.Is(err, ErrBadHistory) {
		t.Fatalf("empty header: got %v", err)
	}
}

func TestStringsEscaped(t *testing.T) {
	h := testHeader()
	h.Agents = []string{"agent \"one\"", "ägent\n2"}
	events := []Event{{Seq: 1, Mode: Naive, Kind: RequestSent, Agent: 1, Resource: 0, Other: 0, RequestID: "id\\x", Request: RequestRenew}}
	_, got, err := Decode(bytes.NewReader(encode(t, h, events)), "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, events) {
		t.Fatalf("got %+v, want %+v", got, events)
	}
}

// FuzzDecode feeds arbitrary lines after a valid header: the decoder never
// panics, every error names a line, and what it reads writes back to the
// same events.
func FuzzDecode(f *testing.F) {
	h := testHeader()
	head := encode(f, h, nil)
	f.Add(encode(f, h, everyKind())[len(head):])
	f.Add([]byte(`{"at_ns":1,"mode":"fenced","kind":"acquired","agent":"agent-1","resource":"res-1","fence":1}`))
	f.Add([]byte("{\"at_ns\":1,\"mode\":\"naive\",\"kind\":\"intervened\",\"intervention\":{\"kind\":\"x\"}}\n\n{"))
	f.Add([]byte("\xff\x00{}"))
	f.Fuzz(func(t *testing.T, tail []byte) {
		data := append(append([]byte(nil), head...), tail...)
		_, events, err := Decode(bytes.NewReader(data), "f")
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Line < 2 || !errors.Is(err, ErrBadHistory) {
				t.Fatalf("error %v: want a *LineError past the header wrapping ErrBadHistory", err)
			}
		}
		_, again, err := Decode(bytes.NewReader(encode(t, h, events)), "again")
		if err != nil {
			t.Fatalf("re-reading what was read: %v", err)
		}
		if len(again) != len(events) {
			t.Fatalf("re-read %d events of %d", len(again), len(events))
		}
		for i := range events {
			if !reflect.DeepEqual(again[i], events[i]) {
				t.Fatalf("event %d: wrote %+v, read back %+v", i, events[i], again[i])
			}
		}
		// The checker takes whatever was read.
		Check(h, events)
	})
}

// The fast path reads what encoding/json reads, or steps aside.
func FuzzFastDecode(f *testing.F) {
	for _, line := range strings.Split(string(encode(f, testHeader(), everyKind())), "\n")[1:] {
		f.Add([]byte(line))
	}
	f.Add([]byte(`{"at_ns":-0,"fence":01}`))
	f.Add([]byte(`{"at_ns":1,"fence":18446744073709551615,"incarnation":4294967296}`))
	f.Add([]byte(` { "kind" : "acquired" , "at_ns" : 3 } `))
	f.Fuzz(func(t *testing.T, line []byte) {
		var fast wireEvent
		if !fastDecode(line, &fast) {
			return
		}
		var slow wireEvent
		if err := json.Unmarshal(line, &slow); err != nil {
			t.Fatalf("fast path read %q, encoding/json refuses it: %v", line, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: fast path read %+v, encoding/json %+v", line, fast, slow)
		}
	})
}

// filler is a stream of n bytes of 'x' and a newline, which counts what
// was read of it.
type filler struct{ left, read int }

func (f *filler) Read(p []byte) (int, error) {
	if f.left < 0 {
		return 0, io.EOF
	}
	n := min(len(p), f.left+1)
	for i := range n {
		p[i] = 'x'
	}
	f.left -= n
	if f.left < 0 {
		p[n-1] = '\n'
	}
	f.read += n
	return n, nil
}

// A line over its bound is refused at the bound, naming the line, and the
// rest of it is never read: the decoder holds no more than the bound of
// any line, however long the line in the file.
func TestLongLinesRefusedAtTheBound(t *testing.T) {
	head := string(encode(t, testHeader(), nil))
	good := `{"at_ns":1,"mode":"fenced","kind":"check_passed","agent":"agent-1","resource":"res-1","fence":1}` + "\n"
	const slack = 64 << 10 // the decoder's read buffer
	for _, tc := range []struct {
		name   string
		before string // the lines before the long one
		long   int    // its length
		line   int
		kept   int // events read before it
		bound  int
		want   string
	}{
		{"event", head + good, 8 * MaxEventLine, 3, 1, MaxEventLine, "an event line may be at most 1 MiB"},
		{"header", "", 2 * MaxHeaderLine, 1, 0, MaxHeaderLine, "the header line may be at most 32 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			long := &filler{left: tc.long}
			_, events, err := Decode(io.MultiReader(strings.NewReader(tc.before), long, strings.NewReader(good)), "h.jsonl")
			var le *LineError
			if !errors.As(err, &le) || !errors.Is(err, ErrBadHistory) || !errors.Is(err, ErrLineTooLong) || le.Line != tc.line {
				t.Fatalf("got %v, want h.jsonl:%d: a *LineError matching ErrBadHistory and ErrLineTooLong", err, tc.line)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if long.read > tc.bound+slack {
				t.Errorf("read %d bytes of a %d-byte line: more than its bound %d", long.read, tc.long, tc.bound)
			}
			if len(events) != tc.kept {
				t.Errorf("kept %d events before the long line, want %d", len(events), tc.kept)
			}
		})
	}
}

// An event line of exactly MaxEventLine bytes is written and read back;
// one byte more is refused by the Encoder, and by the Decoder if written
// by hand.
func TestEventLineAtTheBound(t *testing.T) {
	h := testHeader()
	head := encode(t, h, nil)
	ev := Event{At: time.Millisecond, Mode: Fenced, Kind: LibraryError, Agent: 0, Resource: 0, Other: -1, Detail: "x"}
	base := len(encode(t, h, []Event{ev})) - len(head)
	ev.Detail = strings.Repeat("x", MaxEventLine-base+1)
	data := encode(t, h, []Event{ev})
	if n := len(data) - len(head); n != MaxEventLine {
		t.Fatalf("the event line is %d bytes, want %d", n, MaxEventLine)
	}
	if _, events, err := Decode(bytes.NewReader(data), ""); err != nil || len(events) != 1 || events[0].Detail != ev.Detail {
		t.Fatalf("an event line of exactly the bound: %d events, %v", len(events), err)
	}
	ev.Detail += "x"
	enc, err := NewEncoder(io.Discard, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(&ev); !errors.Is(err, ErrLineTooLong) {
		t.Errorf("the Encoder wrote an event line over the bound: %v", err)
	}
	over := append(data[:len(data)-len(`"}`+"\n")], `x"}`+"\n"...)
	if _, _, err := Decode(bytes.NewReader(over), ""); !errors.Is(err, ErrLineTooLong) {
		t.Errorf("an event line one byte over the bound: %v", err)
	}
}
