package vram

import (
	"errors"
	"testing"
)

// TestGraphShapeOnly checks that a capture on a shape-only sim device
// refuses what a GPU's refuses (host reads read zeros there otherwise, and
// factories skip their copies), so that a capture planned there fails
// where it would fail on the GPU, and that recorded work replays.
func TestGraphShapeOnly(t *testing.T) {
	d := planningDevice(t)
	x := Full(Shape{1, 2, 7, 7}, 2, d)
	defer x.Release()
	tests := []struct {
		name string
		fn   func()
	}{
		{"item", func() { x.Sum().Item() }},
		{"read", func() { x.Float32s() }},
		{"to cpu", func() { x.To(CPU) }},
		{"from cpu", func() { Ones(Shape{3}).To(d) }},
		{"from slice", func() { FromSlice([]float32{1, 2}, Shape{2}, d) }},
		{"rand", func() { Rand(Shape{3}, d) }},
		{"randn", func() { Randn(Shape{3}, d) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := CaptureGraph(d, func() { Tidy(tc.fn) })
			if g != nil || !errors.Is(err, ErrCapturing) {
				t.Fatalf("capture: %v; want an error wrapping ErrCapturing", err)
			}
		})
	}
	EmptyCache(d)
	live, reserved := Storage(d).LiveBytes, MemoryReserved(d)
	var y *Tensor
	g, err := CaptureGraph(d, func() { Tidy(func() { y = Keep(AdaptiveAvgPool2d(x.MulScalar(2), 3, 3)) }) })
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Replay(); err != nil {
		t.Fatal(err)
	}
	// Outside the capture, reads are zeros again, not errors.
	var v float64
	Tidy(func() { v = y.Sum().Item() })
	if v != 0 {
		t.Fatalf("shape-only read after the capture: %v", v)
	}
	g.Release()
	y.Release()
	EmptyCache(d)
	if l, r := Storage(d).LiveBytes, MemoryReserved(d); l != live || r != reserved {
		t.Fatalf("after Release: %d live, %d reserved; %d and %d before", l, r, live, reserved)
	}
}

// TestGraphRandomKeepsGenerator checks that random numbers refused by a
// capture are not drawn: the generator gives, after the failed capture,
// what it would have given without it.
func TestGraphRandomKeepsGenerator(t *testing.T) {
	d := Sim(1)
	tests := []struct {
		name string
		draw func(g *Generator) *Tensor
	}{
		{"rand", func(g *Generator) *Tensor { return Rand(Shape{8}, d, WithGenerator(g)) }},
		{"randn", func(g *Generator) *Tensor { return Randn(Shape{8}, d, WithGenerator(g)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gen, ref := NewGenerator(11), NewGenerator(11)
			if _, err := CaptureGraph(d, func() { tc.draw(gen) }); !errors.Is(err, ErrCapturing) {
				t.Fatalf("capture: %v; want an error wrapping ErrCapturing", err)
			}
			Tidy(func() {
				a, b := tc.draw(gen).Float32s(), tc.draw(ref).Float32s()
				for i := range a {
					if a[i] != b[i] {
						t.Fatalf("draw %d after the failed capture: %v, want %v", i, a[i], b[i])
					}
				}
			})
		})
	}
}
