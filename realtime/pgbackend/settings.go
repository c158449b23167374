package pgbackend

import (
	"fmt"

	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/registry"
)

// The gates the fenced mode's resources can have (Settings.Gate).
const (
	// GateFloor: sqlgate's floor alone. A holder whose lease ended
	// writes until the newer holder's first write raises the floor.
	GateFloor = "floor"
	// GateLease: the floor, and sqllease's table of the mode in the same
	// transaction (sqlgate.WithCurrentLease): a token must be the
	// resource's current, live lease, so a lapsed holder's write is
	// refused before the newer holder has written, too.
	GateLease = "lease"
)

// Settings are the settings only the postgres backend reads: the fixture
// key postgres, and the flags --postgres-<key>.
type Settings struct {
	// Gate is the fenced mode's gate: GateFloor (also "") or GateLease.
	Gate string "json:\"gate,omitempty\" help:\"--backend postgres: the fenced mode's gate (default floor):\\n  floor: sqlgate's floor alone\\n  lease: the floor, and the lease table in the write's own transaction (sqlgate.WithCurrentLease): a write whose lease ended is refused before the newer holder writes too\""
}

// SettingsOf is c's PostgreSQL settings (the zero ones if it gives none).
func SettingsOf(c realtime.Config) Settings {
	if s, ok := c.Settings[registry.Postgres].(*Settings); ok && s != nil {
		return *s
	}
	return Settings{}
}

// Entry is s as a realtime.Config's Settings.
func (s Settings) Entry() map[string]any { return map[string]any{registry.Postgres: &s} }

// checkSettings checks the gate's name (registry.Settings.Check).
func checkSettings(v any) error {
	switch g := v.(*Settings).Gate; g {
	case "", GateFloor, GateLease:
		return nil
	default:
		return &registry.SettingError{Key: "gate", Problem: fmt.Sprintf("must be %s or %s, got %q", GateFloor, GateLease, g)}
	}
}

func init() {
	registry.SetOpener(registry.Backends, registry.Postgres, registry.Settings{New: func() any { return new(Settings) },
		Example: "{gate: lease}", Check: checkSettings})
}
