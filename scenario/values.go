package scenario

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"

	"github.com/leasefence/lab/registry"
	"github.com/leasefence/lab/spec"
)

// The decoder's second half: a scenario mapping into a spec.Scenario, by
// the types of its fields.

var (
	durationType      = reflect.TypeFor[time.Duration]()
	distType          = reflect.TypeFor[spec.Dist]()
	rangeType         = reflect.TypeFor[spec.Range]()
	durationRangeType = reflect.TypeFor[spec.DurationRange]()
	forgersType       = reflect.TypeFor[[]spec.Forgery]()
)

// scenarioKeyBuiltin names the built-in scenario a file starts from.
const scenarioKeyBuiltin = "builtin"

// unchangingKeys are the scenario keys that leave a built-in what it is:
// what it is called and the seed it runs on.
var unchangingKeys = []string{"name", "description", "seed"}

// decodeScenario reads a scenario mapping at path into sc: from the built-in
// it names, if any, then every other key on top, field by field.
//
// A built-in the file changes is no longer that built-in: it loses the
// built-in's name (the file's `name:`, or the file's or fixture's name,
// names it) and its description says what was changed, so that no report
// calls it by a name or describes it with words that no longer hold.
func (d *decoder) decodeScenario(n ast.Node, path string, sc *spec.Scenario) {
	es, _ := d.entries(n, path)
	builtin := ""
	for _, e := range es {
		if e.key != scenarioKeyBuiltin {
			continue
		}
		p := join(path, e.key)
		d.lines[p] = e.line
		name, ok := d.str(d.plain(e.value, p), p)
		if !ok {
			d.failed[path] = true // no built-in: the rest cannot be judged
			continue
		}
		b, ok := spec.Builtin(name)
		if !ok {
			d.fail(e.line, p, "no built-in scenario is called %q (they are: %s)", name, strings.Join(spec.BuiltinNames(), ", "))
			d.failed[path] = true // nothing else about this scenario can be judged
			continue
		}
		*sc = b
		builtin = name
	}
	rest := slices.DeleteFunc(es, func(e entry) bool { return e.key == scenarioKeyBuiltin })
	if builtin != "" {
		var changed []string
		for _, e := range rest {
			if !slices.Contains(unchangingKeys, e.key) {
				changed = append(changed, e.key)
			}
		}
		if len(changed) > 0 {
			sc.Name = ""
			sc.Description = fmt.Sprintf("%s (the built-in %s with %s changed)", sc.Description, builtin, strings.Join(changed, ", "))
		}
	}
	d.decodeFields(rest, path, reflect.ValueOf(sc).Elem(), []string{scenarioKeyBuiltin})
}

// decodeStruct reads a mapping into the struct v, leaving fields the
// mapping does not name as they were.
func (d *decoder) decodeStruct(n ast.Node, path string, v reflect.Value) {
	es, _ := d.entries(n, path)
	d.decodeFields(es, path, v, nil)
}

func (d *decoder) decodeFields(es []entry, path string, v reflect.Value, extra []string) {
	fields := jsonFields(v.Type())
	for _, e := range es {
		p := join(path, e.key)
		i, ok := fields[e.key]
		if why, moved := movedKey(v.Type(), e.key); !ok && moved {
			d.fail(e.line, p, "moved: %s", why)
			continue
		}
		if !ok {
			d.fail(e.line, p, "unknown key (the keys here are: %s)", strings.Join(append(sortedKeys(fields), extra...), ", "))
			continue
		}
		d.lines[p] = e.line
		d.decodeValue(e.value, p, v.Field(i))
	}
}

// movedKey says where key of a mapping read into type t went, if it is a
// key an older scenario file had: the faults of etcd's members
// (etcd.faults) and of the Redis primary (redis.faults) are the one
// faults list now.
func movedKey(t reflect.Type, key string) (string, bool) {
	const faults = "a scenario's faults of its backend's servers are one list, faults: (the same entries, at the scenario's top level)"
	switch {
	case t == reflect.TypeFor[spec.Etcd]() && key == "faults":
		return faults, true
	case t == reflect.TypeFor[spec.Scenario]() && key == registry.Redis: // the old redis: {faults: ...}
		return faults, true
	}
	return "", false
}

// jsonFields maps each json name of struct type t to its field index.
func jsonFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		m[name] = i
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// decodeValue reads n into v by v's type.
func (d *decoder) decodeValue(n ast.Node, path string, v reflect.Value) {
	n = d.plain(n, path)
	if n == nil || d.decodeSpecial(n, path, v) {
		return
	}
	t := v.Type()
	switch t.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, path, v)
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		d.decodeValue(n, path, p.Elem())
		v.Set(p)
	case reflect.Slice:
		d.decodeSlice(n, path, v)
	case reflect.Map:
		d.decodeMap(n, path, v)
	default:
		d.decodeScalar(n, path, v)
	}
}

// decodeSpecial reads the types spelled in a notation of their own (a
// duration, a distribution, a range) and reports whether it did; a range
// or a distribution may also be spelled as a mapping, which it leaves to
// decodeValue.
func (d *decoder) decodeSpecial(n ast.Node, path string, v reflect.Value) bool {
	str, isString := n.(*ast.StringNode)
	set := func(x any, err error, format string) bool {
		if err != nil {
			d.fail(lineOf(n), path, format, err)
		} else {
			v.Set(reflect.ValueOf(x))
		}
		return true
	}
	switch v.Type() {
	case durationType:
		if x, ok := d.duration(n, path); ok {
			v.SetInt(int64(x))
		}
		return true
	case distType:
		if isString {
			x, err := ParseDist(str.Value)
			return set(x, err, "%v")
		}
		// A distribution given as a mapping is the whole distribution,
		// not an edit of the one it overrides: a lognormal over a
		// built-in's uniform stall leaves no min or max behind.
		v.Set(reflect.Zero(v.Type()))
	case rangeType:
		switch n.(type) {
		case *ast.StringNode:
			x, err := ParseRange(str.Value)
			return set(x, err, "must be MIN:MAX or one number, e.g. -5000:5000: %v")
		case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
			if x, ok := d.float(n, path); ok {
				v.Set(reflect.ValueOf(spec.Range{Min: x, Max: x}))
			}
			return true
		}
	case durationRangeType:
		if isString {
			x, err := ParseDurationRange(str.Value)
			return set(x, err, "must be MIN:MAX or one duration, e.g. -50ms:50ms: %v")
		}
	case forgersType:
		// `forgers: N` is N forgers taking the forgeries in turn.
		if _, isCount := n.(*ast.IntegerNode); isCount {
			if x, ok := d.integer(n, path); ok {
				if x < 0 || x > spec.MaxForgers {
					d.fail(lineOf(n), path, "must be a count in [0, %d] or a list of forgeries, got %d", spec.MaxForgers, x)
				} else {
					v.Set(reflect.ValueOf(spec.CountForgers(int(x))))
				}
			}
			return true
		}
	}
	return false
}

func (d *decoder) decodeSlice(n ast.Node, path string, v reflect.Value) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.fail(lineOf(n), path, "must be a list, got %s", describe(n))
		return
	}
	if len(seq.Values) == 0 {
		v.SetZero() // an empty list and no list are the same scenario
		return
	}
	s := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
	for i, item := range seq.Values {
		p := index(path, i)
		d.lines[p] = lineOf(item)
		d.decodeValue(item, p, s.Index(i))
	}
	v.Set(s)
}

func (d *decoder) decodeMap(n ast.Node, path string, v reflect.Value) {
	es, _ := d.entries(n, path)
	if len(es) == 0 {
		v.SetZero()
		return
	}
	t := v.Type()
	m := reflect.MakeMapWithSize(t, len(es))
	for _, e := range es {
		p := join(path, e.key)
		d.lines[p] = e.line
		elem := reflect.New(t.Elem()).Elem()
		d.decodeValue(e.value, p, elem)
		m.SetMapIndex(reflect.ValueOf(e.key).Convert(t.Key()), elem)
	}
	v.Set(m)
}

func (d *decoder) decodeScalar(n ast.Node, path string, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if s, ok := d.str(n, path); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.fail(lineOf(n), path, "must be true or false, got %s", describe(n))
			return
		}
		v.SetBool(b.Value)
	case reflect.Int, reflect.Int64:
		if x, ok := d.integer(n, path); ok {
			if x < math.MinInt || x > math.MaxInt {
				d.fail(lineOf(n), path, "%d is out of range", x)
				return
			}
			v.SetInt(x)
		}
	case reflect.Uint64:
		if x, ok := d.unsigned(n, path); ok {
			v.SetUint(x)
		}
	case reflect.Float64:
		if x, ok := d.float(n, path); ok {
			v.SetFloat(x)
		}
	default:
		// Every field type of spec.Scenario is handled above; a new one
		// must be taught to the decoder, not silently skipped.
		panic(fmt.Sprintf("scenario: no decoder for %s at %s", v.Type(), path))
	}
}

// The scalar readers below (str, unsigned) take a node that plain may
// have refused: nil means the problem is already reported.

func (d *decoder) str(n ast.Node, path string) (string, bool) {
	var s string
	switch n := n.(type) {
	case nil:
		return "", false
	case *ast.StringNode:
		s = n.Value
	case *ast.LiteralNode:
		s = n.Value.Value
	default:
		d.fail(lineOf(n), path, "must be a string, got %s", describe(n))
		return "", false
	}
	if !utf8.ValidString(s) {
		d.fail(lineOf(n), path, "is not valid UTF-8")
		return "", false
	}
	return s, true
}

func (d *decoder) duration(n ast.Node, path string) (time.Duration, bool) {
	switch n := n.(type) {
	case *ast.StringNode:
		x, err := time.ParseDuration(strings.TrimSpace(n.Value))
		if err != nil {
			d.fail(lineOf(n), path, "must be a duration such as \"950ms\" or \"1.5s\", got %q", n.Value)
			return 0, false
		}
		return x, true
	case *ast.IntegerNode:
		if x, ok := n.Value.(int64); ok && x == 0 {
			return 0, true
		}
	}
	d.fail(lineOf(n), path, "must be a duration such as \"950ms\" or \"1.5s\" (with its unit), got %s", describe(n))
	return 0, false
}

func (d *decoder) integer(n ast.Node, path string) (int64, bool) {
	if in, ok := n.(*ast.IntegerNode); ok {
		switch x := in.Value.(type) {
		case int64:
			return x, true
		case uint64:
			if x <= math.MaxInt64 {
				return int64(x), true
			}
		}
		d.fail(lineOf(n), path, "%s is out of range", in.Token.Value)
		return 0, false
	}
	d.fail(lineOf(n), path, "must be an integer, got %s", describe(n))
	return 0, false
}

func (d *decoder) unsigned(n ast.Node, path string) (uint64, bool) {
	if n == nil {
		return 0, false
	}
	if in, ok := n.(*ast.IntegerNode); ok {
		switch x := in.Value.(type) {
		case int64:
			if x >= 0 {
				return uint64(x), true
			}
		case uint64:
			return x, true
		}
		d.fail(lineOf(n), path, "must be an integer >= 0, got %s", in.Token.Value)
		return 0, false
	}
	d.fail(lineOf(n), path, "must be an integer >= 0, got %s", describe(n))
	return 0, false
}

func (d *decoder) float(n ast.Node, path string) (float64, bool) {
	var x float64
	switch n := n.(type) {
	case *ast.FloatNode:
		x = n.Value
	case *ast.IntegerNode:
		switch v := n.Value.(type) {
		case int64:
			x = float64(v)
		case uint64:
			x = float64(v)
		}
	case *ast.InfinityNode, *ast.NanNode:
		x = math.NaN()
	default:
		d.fail(lineOf(n), path, "must be a number, got %s", describe(n))
		return 0, false
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		d.fail(lineOf(n), path, "must be a finite number")
		return 0, false
	}
	return x, true
}

// validate runs Scenario.Validate and locates each field error in the
// file: prefix is where the scenario sits ("scenario" in a fixture). Errors
// about fields that already failed to decode are left out: the value
// Validate saw is not the one the file wrote.
func (d *decoder) validate(sc *spec.Scenario, prefix string) {
	err := sc.Validate()
	if err == nil {
		return
	}
	var fieldErrs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		fieldErrs = j.Unwrap()
	} else {
		fieldErrs = []error{err}
	}
	for _, e := range fieldErrs {
		var fe *spec.FieldError
		if !errors.As(e, &fe) {
			d.errs = append(d.errs, &FileError{File: d.file, Line: d.lineFor(prefix), Field: prefix, Problem: e.Error(), Err: e})
			continue
		}
		p := join(prefix, fe.Field)
		if d.related(p) {
			continue
		}
		d.errs = append(d.errs, &FileError{File: d.file, Line: d.lineFor(p), Field: p, Problem: fe.Problem, Err: fe})
	}
}
