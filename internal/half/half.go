// Package half converts between float32 and the two 16-bit float formats,
// IEEE binary16 (through github.com/x448/float16) and bfloat16.
package half

import (
	"math"

	"github.com/x448/float16"
)

// F16 returns the binary16 bits nearest to f (round to nearest even).
func F16(f float32) uint16 { return uint16(float16.Fromfloat32(f)) }

// F16To32 returns the float32 value of binary16 bits h.
func F16To32(h uint16) float32 { return float16.Frombits(h).Float32() }

// BF16 returns the bfloat16 bits nearest to f (round to nearest even; NaN
// stays NaN).
func BF16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40 // keep it a quiet NaN
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BF16To32 returns the float32 value of bfloat16 bits h.
func BF16To32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
