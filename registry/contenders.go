package registry

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// ErrContender is matched (errors.Is) by every refusal of a contender
// list: a name the table lacks, a contender where it cannot run, a
// discipline it cannot write by.
var ErrContender = errors.New("contender refused")

// ContenderError is a refusal of one contender of a list: Name as it was
// spelled, and the Problem, which says where it can run or what to ask
// instead.
type ContenderError struct {
	Name, Problem string
}

func (e *ContenderError) Error() string { return "contender " + e.Name + ": " + e.Problem }

// Unwrap is ErrContender.
func (e *ContenderError) Unwrap() error { return ErrContender }

// ParseContenders reads a list of contenders as --contenders and a
// fixture's contenders key spell it: names separated by commas, each
// optionally NAME:DISCIPLINE (naive or fenced) to say how its holders
// write, which must be the discipline the contender has. It returns the
// modes in the order given. Nothing is checked against a backend here:
// CheckContenders does.
func ParseContenders(list []string) ([]history.Mode, error) {
	var modes []history.Mode
	for _, spelled := range list {
		spelled = strings.TrimSpace(spelled)
		name, spelledDisc, hasDisc := strings.Cut(spelled, ":")
		disc := history.Discipline(spelledDisc)
		e, ok := Lookup(Contenders, name)
		switch {
		case spelled == "":
			return nil, &ContenderError{Name: `""`, Problem: "an empty name; the contenders are " + OneOf(Contenders)}
		case !ok:
			return nil, &ContenderError{Name: name, Problem: "no contender has that name; they are " + OneOf(Contenders) + " (lab contenders lists them)"}
		case hasDisc && disc != history.DisciplineNaive && disc != history.DisciplineFenced:
			return nil, &ContenderError{Name: spelled, Problem: fmt.Sprintf("the discipline must be %s or %s, got %q", history.DisciplineNaive, history.DisciplineFenced, disc)}
		case hasDisc && disc != e.Discipline && sibling(e, disc) != "":
			return nil, &ContenderError{Name: spelled, Problem: fmt.Sprintf("%s writes %s; the %s discipline is %s", name, e.Discipline, disc, sibling(e, disc))}
		case hasDisc && disc == history.DisciplineFenced && !e.Fence:
			return nil, &ContenderError{Name: spelled, Problem: name + "'s leases have no fence, so its holders cannot write through the gate; " +
				"run it naive (" + name + "), or choose a contender with a fence: " + strings.Join(fenced(), ", ")}
		case hasDisc && disc != e.Discipline:
			return nil, &ContenderError{Name: spelled, Problem: fmt.Sprintf("%s writes %s, and no contender is its %s twin", name, e.Discipline, disc)}
		case slices.Contains(modes, history.Mode(name)):
			return nil, &ContenderError{Name: name, Problem: "named twice"}
		}
		modes = append(modes, history.Mode(name))
	}
	if len(modes) == 0 {
		return nil, &ContenderError{Name: `""`, Problem: "no contender named; they are " + OneOf(Contenders)}
	}
	return modes, nil
}

// fenced names the contenders with a fence that write through the gate.
func fenced() []string {
	var out []string
	for _, e := range All(Contenders) {
		if e.Discipline == history.DisciplineFenced {
			out = append(out, e.Name)
		}
	}
	return out
}

// sibling is the contender of the same library as e that writes by disc.
func sibling(e *Entry, disc history.Discipline) string {
	for _, o := range All(Contenders) {
		if o.Library == e.Library && o.Discipline == disc {
			return "the contender " + o.Name
		}
	}
	return ""
}

// CheckContenders refuses, before anything runs, the first of modes that
// cannot run on backend (Sim for the simulator) or cannot play sc (a
// library contender on the simulator, a fault only the lab's own
// coordinator suffers), or whose adapter this program does not link
// (Entry.Apart). The refusal names the contender and where it can
// run.
func CheckContenders(modes []history.Mode, backend string, sc spec.Scenario) error {
	for _, m := range modes {
		e, ok := Lookup(Contenders, string(m))
		if !ok {
			return &ContenderError{Name: string(m), Problem: "no contender has that name; they are " + OneOf(Contenders) + " (lab contenders lists them)"}
		}
		if err := e.RunsOnBackend(backend); err != nil {
			where := "--backend " + OneOfNames(e.RunsOn)
			if backend == Sim {
				return &ContenderError{Name: e.Name, Problem: "a library's lock runs in real time, not on the simulator: it runs on " + where}
			}
			return &ContenderError{Name: e.Name, Problem: fmt.Sprintf("cannot run on --backend %s: it runs on %s", backend, where)}
		}
		if f := refused(e.Refuses, sc); f != nil {
			err := cannotPlay(e.Name, f, sc)
			err.Problem += "; the contenders that can: " + strings.Join(playingContenders(f), ", ")
			return err
		}
		if e.Apart != "" && !linked(Contenders, e.Name) {
			return &ContenderError{Name: e.Name, Problem: "its adapter is a module of its own, which this program does not link; " + e.Apart}
		}
	}
	return nil
}

// CheckLock refuses, before anything runs, a scenario that a lock under
// test which is no contender of the table (a user's, under labtest)
// cannot play: what every library's contender refuses, for it is not the
// lab's own either (a drift of the lab coordinator's clock). The refusal
// names the lock and the scenario's field.
func CheckLock(name string, sc spec.Scenario) error {
	if f := refused(lockRefuses, sc); f != nil {
		return cannotPlay(name, f, sc)
	}
	return nil
}

// refused is the first of features that sc asks for, or nil.
func refused(features []*Feature, sc spec.Scenario) *Feature {
	for _, f := range features {
		if f.In(sc) {
			return f
		}
	}
	return nil
}

// cannotPlay is the refusal of feature f of sc by the lock name.
func cannotPlay(name string, f *Feature, sc spec.Scenario) *ContenderError {
	return &ContenderError{Name: name, Problem: fmt.Sprintf("cannot play %s (%s) of %s: the lock and its server are the library's own, not the lab's",
		f.What, f.Field, sc.Name)}
}

func playingContenders(f *Feature) []string {
	var out []string
	for _, e := range All(Contenders) {
		if e.PlaysFeature(f) {
			out = append(out, e.Name)
		}
	}
	return out
}

// Library reports whether contender mode is a library's lock (one that
// brings up its own server), not one of the lab's own (Modes).
func Library(mode history.Mode) bool {
	e, ok := Lookup(Contenders, string(mode))
	return ok && e.Library != Lab
}
