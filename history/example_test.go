package history_test

import (
	"fmt"
	"strings"

	"github.com/leasefence/lab/history"
)

// Check judges a history from its header and events alone: here, one
// written by hand in which a write under fence 1 lands after fence 2's.
func ExampleCheck() {
	file := `{"kind":"run","format":2,"scenario":"by hand","modes":["fenced"],"agents":["a","b"],"resources":["r"],"ttl_ns":1000000000,"clocks":{"within_budget":true}}
{"at_ns":0,"mode":"fenced","kind":"granted","agent":"a","resource":"r","fence":1,"deadline_ns":1000000000}
{"at_ns":0,"mode":"fenced","kind":"acquired","agent":"a","resource":"r","fence":1,"deadline_ns":1000000000}
{"at_ns":1000000000,"mode":"fenced","kind":"granted","agent":"b","resource":"r","fence":2,"deadline_ns":2000000000}
{"at_ns":1000000000,"mode":"fenced","kind":"acquired","agent":"b","resource":"r","fence":2,"deadline_ns":2000000000}
{"at_ns":1010000000,"mode":"fenced","kind":"commit_admitted","agent":"b","resource":"r","fence":2}
{"at_ns":1400000000,"mode":"fenced","kind":"commit_admitted","agent":"a","resource":"r","fence":1}
`
	h, events, err := history.Decode(strings.NewReader(file), "by-hand.jsonl")
	if err != nil {
		fmt.Println(err)
		return
	}
	res := history.Check(h, events)
	fenced := res.Modes[history.Fenced]
	fmt.Println("failed:", res.Failed())
	fmt.Println(fenced.Violations[0])
	fmt.Println(fenced.Counterexamples[0].Detail)
	// Output:
	// failed: true
	// 1 stale write landed through the gate
	// fence 1 landed after fence 2 had landed, with no error
}

// A line that cannot be read names its file and line; what came before it
// is kept.
func ExampleDecode_badLine() {
	file := `{"kind":"run","format":2,"scenario":"x","modes":["naive"],"agents":["a"],"resources":["r"],"ttl_ns":1}
{"at_ns":5,"mode":"naive","kind":"check_passed","agent":"a","resource":"r","fence":0}
{"at_ns":6,"mode":"naive","kind":"teleported","agent":"a","resource":"r","fence":0}
`
	_, events, err := history.Decode(strings.NewReader(file), "x.jsonl")
	fmt.Println(err)
	fmt.Println(len(events), "event kept")
	// Output:
	// x.jsonl:3: bad history: unknown kind "teleported"
	// 1 event kept
}
