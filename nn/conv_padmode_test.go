package nn_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// padIndex maps position i of an axis of size n, padded, to the input
// position it copies, as torch.nn.functional.pad's modes do: reflect
// mirrors without repeating the edge (-1 reads 1), replicate repeats the
// edge, circular wraps around.
func padIndex(mode string, i, n int) int {
	switch mode {
	case "reflect":
		if i < 0 {
			return -i
		}
		if i >= n {
			return 2*(n-1) - i
		}
	case "replicate":
		return min(max(i, 0), n-1)
	case "circular":
		return ((i % n) + n) % n
	}
	return i
}

// refModePad pads x [N, C, H, W] (float64 values) by (top, bottom, left,
// right) in mode, entry by entry.
func refModePad(x []float64, xs vram.Shape, mode string, top, bottom, left, right int) ([]float64, vram.Shape) {
	n, c, h, w := xs[0], xs[1], xs[2], xs[3]
	ph, pw := h+top+bottom, w+left+right
	out := make([]float64, 0, n*c*ph*pw)
	for nc := range n * c {
		for i := range ph {
			for j := range pw {
				out = append(out, x[(nc*h+padIndex(mode, i-top, h))*w+padIndex(mode, j-left, w)])
			}
		}
	}
	return out, vram.Shape{n, c, ph, pw}
}

// TestConvPaddingModes checks torch.nn.Conv2d's and Conv1d's padding_mode
// "reflect", "replicate" and "circular": the layer pads its input in that
// mode by its padding (for padding="same", Dilation·(K-1) along an axis,
// half on each side and the odd one at the bottom or right) and then
// convolves without padding, as PyTorch's _conv_forward does. The
// reference pads by hand; the layer runs on the CPU and a sim device.
func TestConvPaddingModes(t *testing.T) {
	cases := []struct {
		name string
		o    nn.ConvOptions
		k    int
		pads [4]int // top, bottom, left, right
	}{
		{"padding 1", nn.ConvOptions{Padding: 1}, 3, [4]int{1, 1, 1, 1}},
		{"per-axis padding", nn.ConvOptions{PaddingHW: [2]int{2, 1}, StrideHW: [2]int{2, 1}}, 3, [4]int{2, 2, 1, 1}},
		{"same even kernel", nn.ConvOptions{PaddingSame: true}, 2, [4]int{0, 1, 0, 1}},
		{"same dilated", nn.ConvOptions{PaddingSame: true, DilationHW: [2]int{2, 1}, KernelHW: [2]int{3, 4}}, 3, [4]int{2, 2, 1, 2}},
		{"no padding", nn.ConvOptions{}, 3, [4]int{}},
	}
	for _, mode := range []string{"reflect", "replicate", "circular"} {
		for _, tc := range cases {
			t.Run(mode+" "+tc.name, func(t *testing.T) {
				g := vram.WithGenerator(vram.NewGenerator(7))
				o := tc.o
				o.PaddingMode = mode
				l := nn.NewConv2d(2, 3, tc.k, o, g)
				xs := vram.Shape{2, 2, 5, 6}
				x := vram.Randn(xs, vram.Float64)
				xp, ps := refModePad(x.Float64s(), xs, mode, tc.pads[0], tc.pads[1], tc.pads[2], tc.pads[3])
				p := l.Params
				p.Padding, p.Same = [2]int{}, false
				want := vram.Conv2d(vram.FromSlice(xp, ps, vram.Float64), l.Weight.Cast(vram.Float64), l.Bias.Cast(vram.Float64), p)
				var y *vram.Tensor
				if err := vram.Catch(func() { y = l.Forward(x.Cast(vram.Float32)) }); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(y.Shape(), want.Shape()) {
					t.Fatalf("shape %v, want %v", y.Shape(), want.Shape())
				}
				checkValues(t, "batched", y.Float64s(), want.Float64s(), 1e-5)
				yu := l.Forward(x.Select(0, 0).Cast(vram.Float32))
				checkValues(t, "unbatched", yu.Float64s(), want.Select(0, 0).Float64s(), 1e-5)
				ycl := l.Forward(x.Cast(vram.Float32).Contiguous(vram.ChannelsLast))
				checkValues(t, "channels-last", ycl.Float64s(), want.Float64s(), 1e-5)
				// Gradients reach the weight and the input.
				xg := x.Cast(vram.Float32).Detach().SetRequiresGrad(true)
				l.Forward(xg).Sum().Backward()
				if xg.Grad() == nil || l.Weight.Grad() == nil {
					t.Errorf("no gradient: input %v, weight %v", xg.Grad() != nil, l.Weight.Grad() != nil)
				}
				// A sim device pads and convolves as the CPU does.
				if sim := vram.Sim(0); sim.Available() {
					l.To(sim)
					ys := l.Forward(x.Cast(vram.Float32).To(sim))
					if ys.Device() != sim {
						t.Errorf("output on %s, want %s", ys.Device(), sim)
					}
					checkValues(t, "sim", ys.Float64s(), want.Float64s(), 1e-5)
				}
			})
		}
		t.Run(mode+" conv1d", func(t *testing.T) {
			g := vram.WithGenerator(vram.NewGenerator(8))
			l := nn.NewConv1d(2, 3, 3, nn.ConvOptions{Padding: 2, PaddingMode: mode}, g)
			xs := vram.Shape{2, 2, 1, 5}
			x := vram.Randn(xs)
			xp, ps := refModePad(x.Float64s(), xs, mode, 0, 0, 2, 2)
			w := l.Weight.Unsqueeze(2)
			want := vram.Conv2d(vram.FromSlice(xp, ps).Cast(vram.Float32), w, l.Bias, vram.Conv2dParams{}).Squeeze(2)
			var y *vram.Tensor
			if err := vram.Catch(func() { y = l.Forward(x.Squeeze(2)) }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(y.Shape(), want.Shape()) {
				t.Fatalf("shape %v, want %v", y.Shape(), want.Shape())
			}
			checkValues(t, "conv1d", y.Float64s(), want.Float64s(), 1e-5)
		})
	}
}

// TestConvPaddingModeErrors checks what PyTorch refuses: a padding mode
// it does not know, any but "zeros" for ConvTranspose2d (ValueError:
// Only "zeros" padding mode is supported), and reflect padding as large
// as the input.
func TestConvPaddingModeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func()
		kind error
	}{
		{"unknown mode", func() { nn.NewConv2d(2, 2, 3, nn.ConvOptions{PaddingMode: "mirror"}) }, vram.ErrArgument},
		{"unknown mode conv1d", func() { nn.NewConv1d(2, 2, 3, nn.ConvOptions{PaddingMode: "Reflect"}) }, vram.ErrArgument},
		{"transposed reflect", func() { nn.NewConvTranspose2d(2, 2, 3, nn.ConvOptions{PaddingMode: "reflect"}) }, vram.ErrArgument},
		{"reflect as large as the input", func() {
			nn.NewConv2d(2, 2, 3, nn.ConvOptions{Padding: 3, PaddingMode: "reflect"}).Forward(vram.Ones(vram.Shape{1, 2, 3, 3}))
		}, vram.ErrShape},
		{"reflect on a 2-D input", func() {
			nn.NewConv2d(2, 2, 3, nn.ConvOptions{Padding: 1, PaddingMode: "reflect"}).Forward(vram.Ones(vram.Shape{3, 3}))
		}, vram.ErrShape},
		{"same with a stride set later", func() {
			l := nn.NewConv2d(2, 2, 3, nn.ConvOptions{PaddingSame: true, PaddingMode: "reflect"})
			l.Params.Stride = [2]int{2, 1}
			l.Forward(vram.Ones(vram.Shape{1, 2, 5, 5}))
		}, vram.ErrArgument},
		{"same with a padding set later", func() {
			l := nn.NewConv2d(2, 2, 3, nn.ConvOptions{PaddingSame: true, PaddingMode: "circular"})
			l.Params.Padding = [2]int{1, 1}
			l.Forward(vram.Ones(vram.Shape{1, 2, 5, 5}))
		}, vram.ErrArgument},
		{"same with an empty kernel set later", func() {
			l := nn.NewConv2d(2, 2, 3, nn.ConvOptions{PaddingSame: true, PaddingMode: "replicate"})
			l.Weight = vram.Ones(vram.Shape{2, 2, 0, 3})
			l.Forward(vram.Ones(vram.Shape{1, 2, 5, 5}))
		}, vram.ErrShape},
		{"1-D same with a stride set later", func() {
			l := nn.NewConv1d(2, 2, 3, nn.ConvOptions{PaddingSame: true, PaddingMode: "reflect"})
			l.Params.Stride = 2
			l.Forward(vram.Ones(vram.Shape{1, 2, 5}))
		}, vram.ErrArgument},
		{"negative padding set later", func() {
			l := nn.NewConv2d(2, 2, 3, nn.ConvOptions{Padding: 1, PaddingMode: "replicate"})
			l.Params.Padding = [2]int{-1, 1}
			l.Forward(vram.Ones(vram.Shape{1, 2, 5, 5}))
		}, vram.ErrArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := catchAll(tc.f); !errors.Is(err, tc.kind) {
				t.Errorf("error %v, want %v", err, tc.kind)
			}
		})
	}
	l := nn.NewConv2d(2, 2, 3, nn.ConvOptions{Padding: 1, PaddingMode: "circular"})
	if got := fmt.Sprint(l.PaddingMode); got != "circular" {
		t.Errorf("PaddingMode %s, want circular", got)
	}
}
