package fencetoken

import (
	"fmt"
	"testing"

	"github.com/leasefence/lab/leasefence"
)

// The cache never holds more than its bound and forgets the oldest first.
func TestProofCacheBound(t *testing.T) {
	c := proofCache{limit: 3}
	for i := range 10 {
		c.put(fmt.Sprint(i), leasefence.Token{Fence: leasefence.Fence(i + 1)})
		if len(c.byKey) > 3 || len(c.order) > 3 {
			t.Fatalf("after %d puts: %d entries, bound 3", i+1, len(c.byKey))
		}
	}
	for i := range 10 {
		_, ok := c.get(fmt.Sprint(i))
		if want := i >= 7; ok != want {
			t.Errorf("proof %d cached = %v, want %v", i, ok, want)
		}
	}
	c.put("9", leasefence.Token{Fence: 99}) // already there: kept as it was
	if got, _ := c.get("9"); got.Fence != 10 {
		t.Fatalf("a second put replaced the entry: %v", got)
	}
	off := proofCache{}
	off.put("a", leasefence.Token{Fence: 1})
	if _, ok := off.get("a"); ok || off.byKey != nil {
		t.Fatal("a cache of size 0 remembered a proof")
	}
}
