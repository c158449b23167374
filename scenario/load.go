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
	data, err := os.ReadFile(path)
	if err != nil {
		return spec.Scenario{}, err
	}
	return Parse(path, data)
}

// Parse reads a scenario file's bytes; file names it in errors. See Load.
//
// A scenario file is a mapping whose keys are the json names of
// spec.Scenario's fields. It either starts from a built-in scenario
// (`builtin: gap`) and changes what it names, or spells the whole scenario
// out. Without a `name:` the scenario is named after the file. The result
// has passed Scenario.Validate.
func Parse(file string, data []byte) (spec.Scenario, error) {
	d := newDecoder(file)
	root, ok := d.parseRoot(data)
	if !ok {
		return spec.Scenario{}, d.err()
	}
	if isFixture(root) {
		fx, err := parseFixture(d, root)
		if err != nil {
			return spec.Scenario{}, err
		}
		return fx.Scenario, nil
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
		return spec.Scenario{}, d.err()
	}
	return sc, nil
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
