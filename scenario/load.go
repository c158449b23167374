package scenario

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/leasefence/lab/spec"
)

// Load reads the scenario of a file: a scenario file, or a fixture file
// (one with a top-level `scenario:` key), whose scenario it returns with the
// fixture's first seed. Every problem is a *FileError naming the file, the
// line and the field.
func Load(path string) (spec.Scenario, error) {
	sc, _, err := Open(path)
	return sc, err
}

// Open reads a file as Load does and, for a fixture file, returns the
// fixture too (nil for a scenario file): where it runs (its backend,
// resource and agents) is the fixture's, not the scenario's.
func Open(path string) (spec.Scenario, *Fixture, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return spec.Scenario{}, nil, err
	}
	return parse(path, data)
}

// Parse reads a scenario file's bytes; file names it in errors. See Load.
//
// A scenario file is a mapping whose keys are the json names of
// spec.Scenario's fields. It either starts from a built-in scenario
// (`builtin: gap`) and changes what it names, or spells the whole scenario
// out. Without a `name:` the scenario is named after the file. The result
// has passed Scenario.Validate.
func Parse(file string, data []byte) (spec.Scenario, error) {
	sc, _, err := parse(file, data)
	return sc, err
}

func parse(file string, data []byte) (spec.Scenario, *Fixture, error) {
	d := newDecoder(file)
	root, ok := d.parseRoot(data)
	if !ok {
		return spec.Scenario{}, nil, d.err()
	}
	if isFixture(root) {
		fx, err := parseFixture(d, root)
		if err != nil {
			return spec.Scenario{}, nil, err
		}
		return fx.Scenario, fx, nil
	}
	var sc spec.Scenario
	d.decodeScenario(root, "", &sc)
	if sc.Name == "" {
		sc.Name = baseName(file)
	}
	if !d.failed[""] {
		d.validate(&sc, "")
	}
	if len(d.errs) > 0 {
		return spec.Scenario{}, nil, d.err()
	}
	return sc, nil, nil
}

// isFixture tells a fixture file from a scenario file: only a fixture has
// a `scenario:` key.
func isFixture(root *ast.MappingNode) bool {
	for _, mv := range root.Values {
		if k, ok := mv.Key.(*ast.StringNode); ok && k.Value == fixtureKeyScenario {
			return true
		}
	}
	return false
}

// baseName is a file's name without its directory and extension.
func baseName(file string) string {
	b := filepath.Base(file)
	if b == "." || b == string(filepath.Separator) {
		return ""
	}
	return strings.TrimSuffix(b, filepath.Ext(b))
}
