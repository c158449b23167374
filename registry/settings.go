package registry

import (
	"errors"
	"reflect"
	"strings"
)

// Settings is what a backend's adapter registers (SetOpener, under its
// Backends entry) for the settings only it reads, so that the flags, the
// fixture files and the runner's configuration carry them knowing none.
// New returns a pointer to a zero struct whose exported fields, each a
// string, int, bool or time.Duration, are the settings: the field's json
// name is its key under the fixture's key named as the backend
// (redis: {wait_replicas: 2}), and --<backend>-<name, _ as -> its flag
// (--redis-wait-replicas), whose help is the field's `help` tag.
type Settings struct {
	New func() any
	// Example is the fixture key's value an error quotes:
	// "{topology: sentinel, watermark: true}".
	Example string
	// Check reports the first value of v (New's type) that no run could
	// take, each alone: a *SettingError naming its key. nil checks
	// nothing.
	Check func(v any) error
}

// SettingError names the key of a backend's settings whose value no run
// could take.
type SettingError struct {
	Key, Problem string
}

func (e *SettingError) Error() string { return e.Key + ": " + e.Problem }

// WithSettings names the backends whose adapters registered Settings,
// in the registry's order.
func WithSettings() []string {
	var out []string
	for _, e := range All(Backends) {
		if _, ok := Opener[Settings](Backends, e.Name); ok {
			out = append(out, e.Name)
		}
	}
	return out
}

// SettingField is one field of a backend's settings struct.
type SettingField struct {
	Key   string // in the fixture: wait_replicas
	Flag  string // on the command line, without dashes: redis-wait-replicas
	Help  string
	Value reflect.Value // settable
}

// SettingFields are the fields of backend's settings v (a pointer to its
// struct), in order.
func SettingFields(backend string, v any) []SettingField {
	rv := reflect.ValueOf(v).Elem()
	var out []SettingField
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || key == "" || key == "-" {
			continue
		}
		out = append(out, SettingField{Key: key, Flag: SettingFlag(backend, key), Help: f.Tag.Get("help"), Value: rv.Field(i)})
	}
	return out
}

// CheckSettings checks backend's settings v (New's type) with the Check
// its adapter registered: nil, or the *SettingError naming the key (an
// error of another type has no key).
func CheckSettings(backend string, v any) *SettingError {
	st, ok := Opener[Settings](Backends, backend)
	if !ok || st.Check == nil || v == nil {
		return nil
	}
	var se *SettingError
	if err := st.Check(v); errors.As(err, &se) {
		return se
	} else if err != nil {
		return &SettingError{Problem: err.Error()}
	}
	return nil
}

// SettingFlag is the flag, without dashes, of backend's setting key:
// redis and wait_replicas make redis-wait-replicas.
func SettingFlag(backend, key string) string {
	return backend + "-" + strings.ReplaceAll(key, "_", "-")
}
