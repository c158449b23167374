// Package scenario reads and writes the lab's YAML files: scenario files,
// which describe one spec.Scenario, and fixture files, which add seeds
// and assertions on the report and are run as tests (`lab fixtures`,
// `go test ./fixtures/...`).
//
// # Scenario files
//
// A scenario file is a mapping whose keys are the JSON names of
// spec.Scenario's fields (the names of the JSON report and of
// spec.FieldError). It either starts from a built-in scenario and
// changes what it names, or spells the whole scenario out:
//
//	builtin: crowd          # start from a built-in (see `lab scenarios`)
//	duration: 30s           # then change what you name
//	network:
//	  drop_replies: 0.1
//	agent:
//	  stall: "5ms-50ms,5%:1.5s-4s"
//	clocks:
//	  drift_ppm: "-5000:5000"
//	partitions:
//	  - {agent: agent-1, from: 5s, to: 15s}
//
// Durations are Go duration strings ("950ms", "1.5s"). A distribution
// (think, stall, work_gap, request_delay, reply_delay, push.delay) is a
// mapping {min, max, tail_p, tail_min, tail_max}, a heavy-tailed
// log-normal {lognormal: {median: 300ms, p99: 4s}} (spec.LogNormal), or
// the one-line form of ParseDist. A distribution given as a mapping
// replaces the one it overrides whole. lock_delay is the coordinator's
// lock-delay (spec.Scenario.LockDelay). A range of drift in ppm is {min, max}, "MIN:MAX" or one
// number; a range of clock offsets is {min, max}, "MIN:MAX" or one duration.
//
// # Strictness
//
// Loading is strict: an unknown key, a value of the wrong type, a YAML
// feature the format has no use for (tags, anchors, aliases, merge keys),
// a key given twice, a null value, and a value out of range (everything
// spec.Scenario.Validate refuses) are errors. Each is a *FileError that
// names the file, the line and the field as written in the file:
//
//	fixtures/gap.yaml:7: scenario.network.drop_replies: must be a probability in [0, 1], got 1.5
//
// Every problem in a file is reported at once (errors.Join), in line order.
// An out-of-range value that came from a built-in rather than from the file
// is reported at the nearest line the file wrote.
//
// # Fixture files
//
// A fixture file has the keys name, description, scenario (a scenario as
// above), seeds (one seed, a list, or {from: N, count: N}), modes (fenced,
// naive or both) and expect. See Fixture for an example. Under expect, each
// mode lists its assertions, each checked against every seed:
//
//   - a counter of the mode's report by its JSON name (acquisitions,
//     commits_refused, stale_writes_landed, containment_breaches, ...), or
//     violations or counterexamples (their counts), compared with a number
//     (`stale_writes_landed: 0`) or with a comparison: ">= N", "<= N",
//     "> N", "< N", "== N", "!= N", where N is a number or another counter
//     of the same report (`refused_overlaps: "== overlaps"`);
//   - counterexamples: a list of counterexamples the report must contain,
//     each matching on the fields it gives (kind, at_ms, resource, holder,
//     fence, other, other_fence);
//   - timeline: a list of events that must happen, each with its instant
//     and kind and any of agent, resource, fence, other, other_fence,
//     reason, outcome, dur, deadline: `- {at: 1400ms, kind: commit_refused, agent: agent-1}`.
//
// expect may also say drift_within_budget: true or false. A fixture that
// runs the fenced mode asserts fenced.violations == 0 unless it makes an
// assertion about violations itself: no fixture passes while the library
// breaks a promise it did not expect it to break.
//
// # Round trip
//
// Format writes any scenario so that Parse reads it back to the same
// scenario; the fuzz target FuzzParse checks that whatever Parse accepts
// survives Format and Parse again unchanged.
package scenario
