package bench

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/rastro-dev/rastro/internal/model"
)

// idGen hands out trace and span ids that are unique by construction: each id
// is a bijective mix (xor with a per-seed key, then the splitmix64 finaliser)
// of a counter, so two different counters can never produce the same id.
type idGen struct {
	k1, k2, k3 uint64
	traces     uint64
	spans      uint64
}

func newIDGen(seed uint64) *idGen {
	r := rand.New(rand.NewPCG(seed, 0x1d5))
	return &idGen{k1: r.Uint64(), k2: r.Uint64(), k3: r.Uint64()}
}

// fmix64 is the splitmix64 / murmur3 finaliser: a bijection on uint64.
func fmix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func (g *idGen) traceID() model.TraceID {
	var t model.TraceID
	for {
		g.traces++
		binary.BigEndian.PutUint64(t[:8], fmix64(g.traces^g.k1))
		binary.BigEndian.PutUint64(t[8:], fmix64(g.traces^g.k2))
		if !t.IsZero() {
			return t
		}
	}
}

func (g *idGen) spanID() model.SpanID {
	var s model.SpanID
	for {
		g.spans++
		binary.BigEndian.PutUint64(s[:], fmix64(g.spans^g.k3))
		if !s.IsZero() {
			return s
		}
	}
}
