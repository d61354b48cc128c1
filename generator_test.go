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

// TestZeroGenerator checks that a zero Generator (var g vram.Generator)
// is ready to use, drawing what NewGenerator(0) draws, as a
// torch.Generator() made without arguments is: each use was a nil-pointer
// dereference.
func TestZeroGenerator(t *testing.T) {
	for _, tc := range []struct {
		name string
		draw func(g *Generator) []float64
	}{
		{"Float64", func(g *Generator) []float64 { return []float64{g.Float64(), g.Float64()} }},
		{"Rand", func(g *Generator) []float64 { return Rand(Shape{3}, WithGenerator(g)).Float64s() }},
		{"Randn", func(g *Generator) []float64 { return Randn(Shape{3}, WithGenerator(g)).Float64s() }},
		{"Dropout", func(g *Generator) []float64 { return Dropout(Ones(Shape{8}), 0.5, WithGenerator(g)).Float64s() }},
		{"ManualSeed", func(g *Generator) []float64 { g.ManualSeed(7); return []float64{g.Float64(), float64(g.InitialSeed())} }},
		{"InitialSeed", func(g *Generator) []float64 { return []float64{float64(g.InitialSeed())} }},
		{"State", func(g *Generator) []float64 {
			var out []float64
			for _, b := range g.State() {
				out = append(out, float64(b))
			}
			return out
		}},
		{"SetState", func(g *Generator) []float64 {
			src := NewGenerator(3)
			src.Float64()
			if err := g.SetState(src.State()); err != nil {
				t.Fatal(err)
			}
			return []float64{g.Float64(), float64(g.InitialSeed())}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got, want []float64
			if err := Catch(func() {
				Tidy(func() {
					var zero Generator
					got = tc.draw(&zero)
					want = tc.draw(NewGenerator(0))
				})
			}); err != nil {
				t.Fatal(err)
			}
			if !sameFloats(got, want, 0) {
				t.Errorf("a zero Generator gave %v, NewGenerator(0) %v", got, want)
			}
		})
	}
}
