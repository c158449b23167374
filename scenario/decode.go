package scenario

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/leasefence/lab/spec"
)

// decoder walks a parsed YAML document into Go values by the json tags of
// the harness types, so that a file's keys are exactly the names of the
// JSON report and of Scenario.Validate's field errors. It collects every
// problem rather than stopping at the first, and remembers the line of
// every key it read so that range errors found later (by Validate) can be
// pointed at their line too.
type decoder struct {
	file   string
	errs   []error
	lines  map[string]int  // field path -> line of its key (or list entry)
	failed map[string]bool // field paths that did not decode
}

func newDecoder(file string) *decoder {
	return &decoder{file: file, lines: make(map[string]int), failed: make(map[string]bool)}
}

func (d *decoder) fail(line int, path, format string, args ...any) {
	d.failed[path] = true
	d.errs = append(d.errs, &FileError{File: d.file, Line: line, Field: path, Problem: fmt.Sprintf(format, args...)})
}

// related reports whether a field error at path would only echo a decode
// error already reported: at path itself, above it or below it.
func (d *decoder) related(path string) bool {
	for q := range d.failed {
		if q == "" || q == path || within(path, q) || within(q, path) {
			return true
		}
	}
	return false
}

// within reports whether path lies below ancestor.
func within(path, ancestor string) bool {
	return strings.HasPrefix(path, ancestor) && len(path) > len(ancestor) &&
		(path[len(ancestor)] == '.' || path[len(ancestor)] == '[')
}

// err joins the problems found, in the order of their lines.
func (d *decoder) err() error {
	slices.SortStableFunc(d.errs, func(a, b error) int {
		return cmp.Compare(errLine(a), errLine(b))
	})
	return errors.Join(d.errs...)
}

func errLine(err error) int {
	if fe, ok := err.(*FileError); ok {
		return fe.Line
	}
	return 0
}

// lineFor finds the line of path, or of its nearest ancestor written in the
// file: a range error in a value that came from a built-in still points at
// the key that chose the built-in.
func (d *decoder) lineFor(path string) int {
	for {
		if l, ok := d.lines[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		path = parentPath(path)
	}
}

func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func lineOf(n ast.Node) int {
	if n == nil {
		return 0
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// parseRoot parses data as exactly one YAML document whose top level is a
// mapping.
func (d *decoder) parseRoot(data []byte) (*ast.MappingNode, bool) {
	f, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		line, msg := syntaxError(err)
		d.errs = append(d.errs, &FileError{File: d.file, Line: line, Problem: "not valid YAML: " + msg, Err: err})
		return nil, false
	}
	var docs []ast.Node
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil && doc.Body.Type() != ast.CommentType && doc.Body.Type() != ast.CommentGroupType {
			docs = append(docs, doc.Body)
		}
	}
	switch len(docs) {
	case 0:
		d.fail(0, "", "the file is empty")
		return nil, false
	case 1:
	default:
		d.fail(lineOf(docs[1]), "", "holds %d YAML documents; a file is one scenario or one fixture", len(docs))
		return nil, false
	}
	m, ok := docs[0].(*ast.MappingNode)
	if !ok {
		d.fail(lineOf(docs[0]), "", "must be a mapping of keys (name: ..., agents: ...), got %s", describe(docs[0]))
		return nil, false
	}
	d.lines[""] = lineOf(m)
	return m, true
}

// syntaxError locates a YAML syntax error on the line a reader must fix.
//
// A key indented deeper than the key above it is read by YAML as the
// continuation of that key's value ("gap\n    ttl" is the one scalar "gap
// ttl"), and the parser blames the token where that scalar began: one line
// too early, or more. The colon that cannot follow it is on the line that
// is wrong, so that line is reported, with what probably happened.
func syntaxError(err error) (line int, msg string) {
	var ye yaml.Error
	if !errors.As(err, &ye) {
		return 0, err.Error()
	}
	msg = ye.GetMessage()
	tk := ye.GetToken()
	if tk == nil || tk.Position == nil {
		return 0, msg
	}
	line = tk.Position.Line
	if next := tk.Next; next != nil && next.Type == token.MappingValueType && next.Position != nil && next.Position.Line > line {
		line = next.Position.Line
		if tk.Type == token.StringType {
			msg += " (a key indented deeper than the key above it?)"
		}
	}
	return line, msg
}

// entries returns the key/value pairs of a mapping node, failing (and
// returning false) on anything that is not a mapping with plain keys.
func (d *decoder) entries(n ast.Node, path string) ([]entry, bool) {
	n = d.plain(n, path)
	if n == nil {
		return nil, false
	}
	m, ok := n.(*ast.MappingNode)
	if !ok {
		d.fail(lineOf(n), path, "must be a mapping, got %s", describe(n))
		return nil, false
	}
	out := make([]entry, 0, len(m.Values))
	seen := make(map[string]int, len(m.Values)) // key -> its line
	good := true
	for _, mv := range m.Values {
		k, ok := mv.Key.(*ast.StringNode)
		if !ok {
			d.fail(lineOf(mv.Key), path, "keys must be plain names, got %s", describe(mv.Key))
			good = false
			continue
		}
		if first, dup := seen[k.Value]; dup {
			// The parser is told to let duplicates through so that this
			// one problem does not hide the others in the file.
			d.fail(lineOf(k), join(path, k.Value), "is given twice (first on line %d)", first)
			good = false
			continue
		}
		seen[k.Value] = lineOf(k)
		out = append(out, entry{key: k.Value, line: lineOf(k), value: mv.Value})
	}
	return out, good
}

type entry struct {
	key   string
	line  int
	value ast.Node
}

// plain refuses the YAML features a scenario file has no use for (tags,
// anchors, aliases, merge keys) and null values, so that what a file says
// is what it means.
func (d *decoder) plain(n ast.Node, path string) ast.Node {
	switch n := n.(type) {
	case nil, *ast.NullNode:
		// A missing value has no token of its own worth pointing at: the
		// key that lacks it is where the reader looks.
		line := d.lines[path]
		if line == 0 {
			line = lineOf(n)
		}
		d.fail(line, path, "has no value")
		return nil
	case *ast.TagNode:
		d.fail(lineOf(n), path, "YAML tags (%s) are not supported: write the value plainly", n.Start.Value)
		return nil
	case *ast.AnchorNode, *ast.AliasNode:
		d.fail(lineOf(n), path, "YAML anchors and aliases are not supported: write the value out")
		return nil
	case *ast.MergeKeyNode:
		d.fail(lineOf(n), path, "YAML merge keys are not supported")
		return nil
	}
	return n
}

// describe names the kind of a node for an error message.
func describe(n ast.Node) string {
	switch n := n.(type) {
	case nil, *ast.NullNode:
		return "nothing (null)"
	case *ast.MappingNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode:
		return fmt.Sprintf("the string %q", n.Value)
	case *ast.LiteralNode:
		return "a block of text"
	case *ast.IntegerNode:
		return fmt.Sprintf("the integer %v", n.Value)
	case *ast.FloatNode:
		return fmt.Sprintf("the number %v", n.Value)
	case *ast.BoolNode:
		return fmt.Sprintf("the boolean %v", n.Value)
	case *ast.InfinityNode, *ast.NanNode:
		return "a number that is not finite"
	}
	return n.Type().YAMLName()
}

var (
	durationType      = reflect.TypeFor[time.Duration]()
	distType          = reflect.TypeFor[spec.Dist]()
	rangeType         = reflect.TypeFor[spec.Range]()
	durationRangeType = reflect.TypeFor[spec.DurationRange]()
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
		if !ok {
			d.fail(e.line, p, "unknown key (the keys here are: %s)", strings.Join(append(sortedKeys(fields), extra...), ", "))
			continue
		}
		d.lines[p] = e.line
		d.decodeValue(e.value, p, v.Field(i))
	}
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
	if n == nil {
		return
	}
	t := v.Type()
	switch t {
	case durationType:
		if x, ok := d.duration(n, path); ok {
			v.SetInt(int64(x))
		}
		return
	case distType:
		if s, isString := n.(*ast.StringNode); isString {
			x, err := ParseDist(s.Value)
			if err != nil {
				d.fail(lineOf(n), path, "%v", err)
				return
			}
			v.Set(reflect.ValueOf(x))
			return
		}
	case rangeType:
		switch s := n.(type) {
		case *ast.StringNode:
			x, err := ParseRange(s.Value)
			if err != nil {
				d.fail(lineOf(n), path, "must be MIN:MAX or one number, e.g. -5000:5000: %v", err)
				return
			}
			v.Set(reflect.ValueOf(x))
			return
		case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
			if x, ok := d.float(n, path); ok {
				v.Set(reflect.ValueOf(spec.Range{Min: x, Max: x}))
			}
			return
		}
	case durationRangeType:
		if s, isString := n.(*ast.StringNode); isString {
			x, err := ParseDurationRange(s.Value)
			if err != nil {
				d.fail(lineOf(n), path, "must be MIN:MAX or one duration, e.g. -50ms:50ms: %v", err)
				return
			}
			v.Set(reflect.ValueOf(x))
			return
		}
	}
	switch t.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, path, v)
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		d.decodeValue(n, path, p.Elem())
		v.Set(p)
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			d.fail(lineOf(n), path, "must be a list, got %s", describe(n))
			return
		}
		if len(seq.Values) == 0 {
			v.SetZero() // an empty list and no list are the same scenario
			return
		}
		s := reflect.MakeSlice(t, len(seq.Values), len(seq.Values))
		for i, item := range seq.Values {
			p := index(path, i)
			d.lines[p] = lineOf(item)
			d.decodeValue(item, p, s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		es, _ := d.entries(n, path)
		if len(es) == 0 {
			v.SetZero()
			return
		}
		m := reflect.MakeMapWithSize(t, len(es))
		for _, e := range es {
			p := join(path, e.key)
			d.lines[p] = e.line
			elem := reflect.New(t.Elem()).Elem()
			d.decodeValue(e.value, p, elem)
			m.SetMapIndex(reflect.ValueOf(e.key).Convert(t.Key()), elem)
		}
		v.Set(m)
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
		panic(fmt.Sprintf("scenario: no decoder for %s at %s", t, path))
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
