package history

import (
	"encoding/binary"
	"fmt"
	"math"
)

// digest folds each event into a 64-bit hash a word at a time (multiply,
// xor-shift): cheap on the hot path, and the same on every platform. It
// covers every field a history file carries, so a history read back from
// its file has the digest of the run that wrote it.
type digest struct{ h uint64 }

func newDigest() digest { return digest{h: 0xcbf29ce484222325} }

func (d *digest) u64(v uint64) {
	h := (d.h ^ v) * 0x100000001b3
	d.h = h ^ h>>29
}

// str folds a string and its length.
func (d *digest) str(v string) {
	d.u64(uint64(len(v)))
	d.chars(v)
}

// chars folds a string's bytes, eight at a time; the caller folds its
// length.
func (d *digest) chars(v string) {
	if v == "" {
		return
	}
	for len(v) >= 8 {
		d.u64(binary.LittleEndian.Uint64([]byte(v[:8])))
		v = v[8:]
	}
	var tail uint64
	for i := 0; i < len(v); i++ {
		tail |= uint64(v[i]) << (8 * i)
	}
	d.u64(tail)
}

func (d *digest) add(e *Event) {
	// Indices are below 2^20 and kinds below 2^8, so kind, agent, resource
	// and the other party pack into two words, with the lengths of the
	// short strings.
	d.u64(uint64(e.At))
	d.u64(uint64(e.Kind) | uint64(uint32(e.Agent))<<8 | uint64(uint32(e.Resource))<<32)
	d.u64(uint64(uint32(e.Other)) | uint64(len(e.Request))<<32 | uint64(len(e.Reason))<<40 | uint64(len(e.Outcome))<<48)
	d.u64(uint64(e.Fence))
	d.u64(uint64(e.OtherFence) ^ uint64(uint32(e.Incarnation))<<32)
	d.u64(uint64(e.Dur))
	d.u64(uint64(e.Deadline))
	d.chars(string(e.Request))
	d.chars(string(e.Reason))
	d.chars(string(e.Outcome))
	d.str(e.RequestID)
	if e.Detail != "" {
		d.str(e.Detail)
	}
	if iv := e.Intervention; iv != nil {
		d.str(string(iv.Kind))
		d.str(iv.Agent)
		d.u64(uint64(iv.Duration))
		d.u64(math.Float64bits(iv.Value))
		if iv.Persist {
			d.u64(1)
		}
	}
	if e.Fault != "" || e.Target != "" {
		d.str(e.Fault)
		d.str(e.Target)
	}
}

func (d digest) String() string { return fmt.Sprintf("%016x", d.h) }

// combineDigests combines the digests of several modes' histories into one.
func combineDigests(modes []Mode, digests map[Mode]string) string {
	d := newDigest()
	for _, m := range modes {
		if x, ok := digests[m]; ok {
			d.str(string(m))
			d.str(x)
		}
	}
	return d.String()
}
