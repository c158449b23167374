package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasefence/lab/spec"
)

// Format writes sc as a scenario file that Parse reads back to the same
// scenario (reflect.DeepEqual), seed included. It writes every field that
// is not zero, in the order of the Scenario type, with durations as Go
// strings ("950ms") and distributions in their one-line form when it holds
// them exactly; it never writes `builtin:`, so the file stands alone.
func Format(sc spec.Scenario) []byte {
	var b bytes.Buffer
	e := encoder{w: &b}
	e.fields(reflect.ValueOf(sc), 0)
	return b.Bytes()
}

type encoder struct{ w *bytes.Buffer }

func (e *encoder) indent(level int) { e.w.WriteString(strings.Repeat("  ", level)) }

// fields writes the non-zero fields of struct v as a block mapping.
func (e *encoder) fields(v reflect.Value, level int) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() || v.Field(i).IsZero() {
			continue
		}
		e.entry(name, v.Field(i), level)
	}
}

// entry writes "key: value", or "key:" and a nested block.
func (e *encoder) entry(key string, v reflect.Value, level int) {
	e.indent(level)
	e.w.WriteString(key)
	e.w.WriteByte(':')
	if s, ok := scalar(v); ok {
		e.w.WriteString(" " + s + "\n")
		return
	}
	// An empty block would read back as null, which the decoder refuses.
	switch {
	case v.Kind() == reflect.Struct && v.IsZero(), v.Kind() == reflect.Map && v.Len() == 0:
		e.w.WriteString(" {}\n")
		return
	case v.Kind() == reflect.Slice && v.Len() == 0:
		e.w.WriteString(" []\n")
		return
	}
	e.w.WriteByte('\n')
	e.block(v, level+1)
}

// block writes a struct, map or slice at level.
func (e *encoder) block(v reflect.Value, level int) {
	switch v.Kind() {
	case reflect.Struct:
		e.fields(v, level)
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			e.entry(quote(k.String()), v.MapIndex(k), level)
		}
	case reflect.Slice:
		for i := range v.Len() {
			item := v.Index(i)
			e.indent(level)
			if s, ok := scalar(item); ok {
				e.w.WriteString("- " + s + "\n")
				continue
			}
			// A list entry is a mapping written in flow style on one line,
			// which keeps scripted timelines readable: one action a line.
			e.w.WriteString("- " + flow(item) + "\n")
		}
	default:
		panic(fmt.Sprintf("scenario: no encoder for %s", v.Type()))
	}
}

// flow writes a struct as a one-line flow mapping of its non-zero fields.
func flow(v reflect.Value) string {
	var parts []string
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fv := v.Field(i)
		if name == "" || name == "-" || !f.IsExported() || fv.IsZero() {
			continue
		}
		s, ok := scalar(fv)
		if !ok {
			s = flow(fv)
		}
		parts = append(parts, name+": "+s)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// scalar writes v on one line when it is a scalar, a distribution or a
// range.
func scalar(v reflect.Value) (string, bool) {
	switch v.Type() {
	case durationType:
		return time.Duration(v.Int()).String(), true
	case distType:
		if s, ok := FormatDist(v.Interface().(spec.Dist)); ok {
			return quote(s), true
		}
		return flow(v), true
	case rangeType:
		r := v.Interface().(spec.Range)
		if r.Min == r.Max {
			return FormatRange(r), true
		}
		return quote(FormatRange(r)), true
	case durationRangeType:
		return quote(FormatDurationRange(v.Interface().(spec.DurationRange))), true
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return "", false
		}
		return scalar(v.Elem())
	case reflect.String:
		return quote(v.String()), true
	case reflect.Bool:
		return strconv.FormatBool(v.Bool()), true
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10), true
	case reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10), true
	case reflect.Float64:
		return formatFloat(v.Float()), true
	}
	return "", false
}

// formatFloat writes a float so that YAML reads it back as the same float,
// and as a number (a bare "1e+06" would do, "1" would too: the decoder
// takes integers where it wants floats).
func formatFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// quote writes s as a YAML double-quoted scalar. JSON's string escapes are
// a subset of YAML's, so a JSON string is a YAML string that reads back the
// same.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // a Go string always encodes
	}
	return strings.TrimSuffix(b.String(), "\n")
}
