package registry

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// Kind is one column of the table: what an entry chooses.
type Kind struct {
	Name string // "backend"
	// Flag is the command line's flag that chooses it ("--backend"), Key
	// a fixture file's key ("backend").
	Flag, Key string
}

// The kinds of entries.
var (
	Backends   = &Kind{Name: "backend", Flag: "--backend", Key: "backend"}
	Stores     = &Kind{Name: "resource", Flag: "--resource", Key: "resource"}
	Drivers    = &Kind{Name: "agents", Flag: "--agents-as", Key: "agents"}
	Contenders = &Kind{Name: "contender", Flag: "--contenders", Key: "contenders"}
)

// Needs is what an entry needs to run.
type Needs struct {
	// Server is the server process it starts or dials ("" for none).
	Server string
	// Backend, for a store, is the backend whose server keeps it (the
	// gates beside the leases); "" for a store of its own.
	Backend string
	// Processes: it runs the agents, or its members, as OS processes.
	Processes bool
	// Fence: a contender that writes through the gate needs a fence.
	Fence bool
}

// Entry is one row of the table.
type Entry struct {
	Kind *Kind
	Name string
	// Doc says what it is in a few words, for listings and help.
	Doc   string
	Needs Needs
	// Real: it runs in real time (every backend but the simulator, and
	// what only a real backend has: every store and driver).
	Real bool
	// Plays, for a backend or a driver, lists the fault kinds it plays
	// (of spec.Faults): a scenario that asks for any other is refused.
	// A new fault kind is played by no runner until its entry says so.
	Plays []spec.Fault
	// Refuses lists the scenario features besides faults it cannot play.
	Refuses []*Feature
	// RunsOn names the backends it runs on (nil: any). A contender's
	// own besides: the library (and its version) it is, whether its
	// leases have a fence, and its write discipline.
	Library, Version string
	Fence            bool
	Discipline       history.Discipline
	// NotExpressible, for a library's contender, names the rules of the
	// lease contract its API cannot express, each with why (the history
	// header's Contender carries it; the checker reports them n/a).
	NotExpressible map[history.ContractRule]string
	RunsOn         []string
	// Apart, for a contender whose adapter is a module of its own that
	// the lab's build leaves out (its library costs more to compile than
	// the lab), says how to run it; CheckContenders refuses it, saying
	// so, in a program that does not link its adapter.
	Apart string
	// Stores, for a driver, are the stores it works with (nil: any).
	Stores []string
	// Shared: every OS process of a run can reach it (a server, files
	// on disk), so agents run as processes share it (Shares). A backend
	// or store that lives in the lab's own process is not; a contender
	// is when its lock can be opened in any process that reaches its
	// server.
	Shared bool
}

// ErrCannotPlay is matched (errors.Is) by every refusal CanPlay returns,
// beside the feature's own error (spec.ErrNeedsEtcd, ...).
var ErrCannotPlay = errors.New("cannot play the scenario")

// CannotPlayError is a refusal: Entry cannot play Feature of a scenario,
// and Alternatives are the entries of the feature's kind that can.
type CannotPlayError struct {
	Entry        *Entry
	Feature      *Feature
	Alternatives []string
}

func (e *CannotPlayError) Error() string {
	s := fmt.Sprintf("%s %s cannot play %s", e.Entry.Kind.Name, e.Entry.Name, e.Feature.What)
	if len(e.Alternatives) > 0 {
		s += ": use " + e.Feature.Kind.Flag + " " + strings.Join(e.Alternatives, " or ")
	}
	return s
}

// Unwrap is ErrCannotPlay and the feature's own error.
func (e *CannotPlayError) Unwrap() []error {
	errs := []error{ErrCannotPlay}
	if e.Feature.Err != nil {
		errs = append(errs, e.Feature.Err)
	}
	return errs
}

// CanPlay reports why e cannot play sc: the first feature of sc (in the
// order of Features) it refuses, or whose fault kind it does not play, as
// a *CannotPlayError; nil if it can.
func (e *Entry) CanPlay(sc spec.Scenario) error {
	for _, f := range Features {
		if !e.PlaysFeature(f) && f.In(sc) {
			return &CannotPlayError{Entry: e, Feature: f, Alternatives: playing(f)}
		}
	}
	return nil
}

// PlaysFeature reports whether e can play feature f.
func (e *Entry) PlaysFeature(f *Feature) bool {
	if f.Fault != "" {
		return slices.Contains(e.Faults(), f.Fault)
	}
	return !slices.Contains(e.Refuses, f)
}

// playing names the entries of f's kind that play it.
func playing(f *Feature) []string {
	var out []string
	for _, e := range All(f.Kind) {
		if e.PlaysFeature(f) {
			out = append(out, e.Name)
		}
	}
	return out
}

// All lists k's entries in the table's order.
func All(k *Kind) []*Entry {
	var out []*Entry
	for _, e := range table {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// Names lists k's entries' names in the table's order.
func Names(k *Kind) []string {
	var out []string
	for _, e := range All(k) {
		out = append(out, e.Name)
	}
	return out
}

// Lookup is k's entry named name.
func Lookup(k *Kind, name string) (*Entry, bool) {
	for _, e := range table {
		if e.Kind == k && e.Name == name {
			return e, true
		}
	}
	return nil, false
}

// Must is k's entry named name; it panics if there is none, so that a
// name a program spells wrong fails its first test.
func Must(k *Kind, name string) *Entry {
	e, ok := Lookup(k, name)
	if !ok {
		panic(fmt.Sprintf("registry: no %s named %q", k.Name, name))
	}
	return e
}

// Choice checks that name is one of k's entries, as a flag or a key says
// it: the error lists them ("must be sim, memory, etcd, redis, got
// \"zookeeper\"").
func Choice(k *Kind, name string) error {
	if _, ok := Lookup(k, name); ok {
		return nil
	}
	return fmt.Errorf("must be %s, got %q", OneOf(k), name)
}

// OneOf spells k's names as a choice: "in-process or process" for two,
// "sim, memory, etcd, redis" for more.
func OneOf(k *Kind) string {
	names := Names(k)
	if len(names) == 2 {
		return names[0] + " or " + names[1]
	}
	return strings.Join(names, ", ")
}

var openers sync.Map // openerKey -> any

// openerKey names one opener: an entry has at most one of each type (one
// that starts it, one that attaches to it from another process, ...).
type openerKey struct {
	kind *Kind
	name string
	typ  reflect.Type
}

// SetOpener registers what opens k's entry name: the package that
// implements the entry calls it from an init function, with an opener of
// the type its runner asks for. An entry may have openers of several
// types (one that starts it, one that attaches to it from another
// process). It panics on a name the table does not hold, and on a second
// opener of one type for one entry.
func SetOpener(k *Kind, name string, open any) {
	Must(k, name)
	if _, dup := openers.LoadOrStore(openerKey{k, name, reflect.TypeOf(open)}, open); dup {
		panic(fmt.Sprintf("registry: a second %T opener for %s %q", open, k.Name, name))
	}
}

// linked reports whether k's entry name has an opener of any type.
func linked(k *Kind, name string) bool {
	found := false
	openers.Range(func(key, _ any) bool {
		ok := key.(openerKey)
		found = ok.kind == k && ok.name == name
		return !found
	})
	return found
}

// Opener is the opener of type T registered for k's entry name: false if
// none is.
func Opener[T any](k *Kind, name string) (T, bool) {
	v, ok := openers.Load(openerKey{k, name, reflect.TypeFor[T]()})
	t, isT := v.(T)
	return t, ok && isT
}
