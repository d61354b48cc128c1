package nn_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

func TestConv1dLayer(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(1))
	tests := []struct {
		name      string
		in, out   int
		kernel    int
		o         nn.ConvOptions
		x         vram.Shape
		weight, y vram.Shape
	}{
		{"plain", 3, 4, 3, nn.ConvOptions{}, vram.Shape{2, 3, 10}, vram.Shape{4, 3, 3}, vram.Shape{2, 4, 8}},
		{"stride padding dilation", 2, 6, 3, nn.ConvOptions{Stride: 2, Padding: 2, Dilation: 2}, vram.Shape{1, 2, 9}, vram.Shape{6, 2, 3}, vram.Shape{1, 6, 5}},
		{"groups no bias", 4, 6, 2, nn.ConvOptions{Groups: 2, NoBias: true}, vram.Shape{2, 4, 5}, vram.Shape{6, 2, 2}, vram.Shape{2, 6, 4}},
		{"same", 2, 3, 4, nn.ConvOptions{PaddingSame: true}, vram.Shape{2, 2, 7}, vram.Shape{3, 2, 4}, vram.Shape{2, 3, 7}},
		{"unbatched", 2, 3, 3, nn.ConvOptions{Padding: 1}, vram.Shape{2, 7}, vram.Shape{3, 2, 3}, vram.Shape{3, 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := nn.NewConv1d(tc.in, tc.out, tc.kernel, tc.o, vram.Float64, g)
			sd := nn.StateDict(l)
			if !slices.Equal(sd["weight"].Shape(), tc.weight) || (sd["bias"] == nil) != tc.o.NoBias {
				t.Fatalf("state dict %v", sd)
			}
			bound := 1 / math.Sqrt(float64(tc.weight[1]*tc.kernel))
			for _, p := range l.Parameters() {
				for _, v := range p.Float64s() {
					if math.Abs(v) > bound {
						t.Fatalf("initial value %v outside ±%v", v, bound)
					}
				}
			}
			x := vram.Randn(tc.x, vram.Float64, g)
			y := l.Forward(x)
			if !slices.Equal(y.Shape(), tc.y) {
				t.Fatalf("output shape %v, want %v", y.Shape(), tc.y)
			}
			want := vram.Conv1d(x, l.Weight, l.Bias, l.Params)
			checkValues(t, "output", y.Float64s(), want.Float64s(), 0)
			y.Sum().Backward()
			if l.Weight.Grad() == nil {
				t.Error("no weight gradient")
			}
		})
	}
}

func TestConv1dLayerErrors(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"pair", func() { nn.NewConv1d(2, 2, 3, nn.ConvOptions{StrideHW: [2]int{1, 2}}) }},
		{"output padding", func() { nn.NewConv1d(2, 2, 3, nn.ConvOptions{OutputPadding: 1}) }},
		{"groups", func() { nn.NewConv1d(3, 2, 3, nn.ConvOptions{Groups: 2}) }},
		{"kernel", func() { nn.NewConv1d(3, 2, 0, nn.ConvOptions{}) }},
		{"same stride", func() { nn.NewConv1d(3, 2, 3, nn.ConvOptions{PaddingSame: true, Stride: 2}) }},
		{"padding mode", func() { nn.NewConv1d(3, 2, 3, nn.ConvOptions{PaddingMode: "mirror"}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := vram.Catch(tc.f); !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("got %v, want an ErrArgument", err)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	x := vram.FromSlice([]float64{1, -2, 3}, vram.Shape{3}, vram.WithGrad())
	id := nn.NewIdentity()
	if len(id.Parameters()) != 0 {
		t.Fatal("Identity has parameters")
	}
	y := id.Forward(x)
	checkValues(t, "output", y.Float64s(), x.Float64s(), 0)
	s := nn.NewSequential(nn.NewIdentity(), nn.Func(func(x *vram.Tensor) *vram.Tensor { return x.MulScalar(2) }), nn.NewIdentity())
	z := s.Forward(y)
	y.Release() // x stays usable: Forward returned a new reference
	z.Sum().Backward()
	checkValues(t, "gradient", x.Grad().Float64s(), []float64{2, 2, 2}, 0)
	checkValues(t, "input", x.Float64s(), []float64{1, -2, 3}, 0)
	if err := vram.Catch(func() { id.Forward(nil) }); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("nil input: %v", err)
	}
}
