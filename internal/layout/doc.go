// Package layout holds the test of the lab's arrows: which of its
// packages may import which (the picture in docs/architecture.md). It has
// no code of its own; `go test ./internal/layout` fails on an import the
// picture does not allow, or on a package the picture does not place.
package layout
