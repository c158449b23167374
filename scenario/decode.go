package scenario

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
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
