//go:build !unix

package scratch

// running cannot tell on this system: every owner is taken for alive, and
// nothing is removed.
func running(int) bool { return true }
