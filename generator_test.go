package vram

import "testing"

// TestDefaultGenerator: DefaultGenerator is the generator that ManualSeed
// seeds and that factories draw from without WithGenerator.
func TestDefaultGenerator(t *testing.T) {
	for _, seed := range []uint64{0, 5, 1 << 40} {
		ManualSeed(seed)
		got := DefaultGenerator().Float64()
		want := NewGenerator(seed).Float64()
		if got != want {
			t.Errorf("seed %d: DefaultGenerator drew %v, a new generator of that seed %v", seed, got, want)
		}
		ManualSeed(seed)
		x := Rand(Shape{1})
		if v := x.Float32s()[0]; v != float32(want) {
			t.Errorf("seed %d: Rand drew %v, want %v", seed, v, float32(want))
		}
		x.Release()
	}
	ManualSeed(0)
}
