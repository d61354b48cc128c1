package vram_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
)

// TestResizeOps pins Pad, Interpolate, PixelShuffle, PixelUnshuffle,
// Unfold, Fold and Tensor.Unfold against values worked out by hand from
// PyTorch's definitions (torch.nn.functional.pad, interpolate with its
// source-index formulas, pixel_shuffle, unfold, fold, Tensor.unfold), on
// the CPU and a simulated device, and checks that nothing stays
// allocated.
func TestResizeOps(t *testing.T) {
	ar := func(dev vram.Device, shape ...int) *vram.Tensor {
		n := 1
		for _, s := range shape {
			n *= s
		}
		return vram.Arange(0, float64(n), 1, dev, vram.Float64).Reshape(shape...)
	}
	vec := func(dev vram.Device, v ...float64) *vram.Tensor {
		return vram.FromSlice(v, vram.Shape{1, 1, len(v)}, dev)
	}
	cases := []struct {
		name  string
		op    func(dev vram.Device) *vram.Tensor
		shape vram.Shape
		want  []float64
	}{
		{"pad constant", func(d vram.Device) *vram.Tensor { return vram.Pad(vec(d, 1, 2, 3), []int{2, 1}, vram.PadConstant, 9) },
			vram.Shape{1, 1, 6}, []float64{9, 9, 1, 2, 3, 9}},
		{"pad constant crop", func(d vram.Device) *vram.Tensor { return vram.Pad(vec(d, 1, 2, 3), []int{-1, 1}, vram.PadConstant, 0) },
			vram.Shape{1, 1, 3}, []float64{2, 3, 0}},
		{"pad constant leading dim", func(d vram.Device) *vram.Tensor {
			return vram.Pad(ar(d, 2, 2), []int{0, 0, 1, 0}, vram.PadConstant, -1)
		}, vram.Shape{3, 2}, []float64{-1, -1, 0, 1, 2, 3}},
		{"pad constant every dim", func(d vram.Device) *vram.Tensor {
			return vram.Pad(ar(d, 1, 2), []int{1, 0, 0, 1}, vram.PadConstant, 7)
		}, vram.Shape{2, 3}, []float64{7, 0, 1, 7, 7, 7}},
		{"pad nothing", func(d vram.Device) *vram.Tensor { return vram.Pad(vec(d, 1, 2), nil, vram.PadConstant, 0) },
			vram.Shape{1, 1, 2}, []float64{1, 2}},
		{"pad reflect", func(d vram.Device) *vram.Tensor { return vram.Pad(vec(d, 1, 2, 3), []int{2, 2}, vram.PadReflect, 0) },
			vram.Shape{1, 1, 7}, []float64{3, 2, 1, 2, 3, 2, 1}},
		{"pad reflect crop", func(d vram.Device) *vram.Tensor { return vram.Pad(vec(d, 1, 2, 3), []int{-1, 1}, vram.PadReflect, 0) },
			vram.Shape{1, 1, 3}, []float64{2, 3, 2}},
		{"pad replicate", func(d vram.Device) *vram.Tensor { return vram.Pad(vec(d, 1, 2, 3), []int{2, 1}, vram.PadReplicate, 0) },
			vram.Shape{1, 1, 6}, []float64{1, 1, 1, 2, 3, 3}},
		{"pad circular", func(d vram.Device) *vram.Tensor { return vram.Pad(vec(d, 1, 2, 3), []int{2, 1}, vram.PadCircular, 0) },
			vram.Shape{1, 1, 6}, []float64{2, 3, 1, 2, 3, 1}},
		{"pad circular crop", func(d vram.Device) *vram.Tensor { return vram.Pad(vec(d, 1, 2, 3), []int{-1, 2}, vram.PadCircular, 0) },
			vram.Shape{1, 1, 4}, []float64{2, 3, 2, 3}},
		{"pad circular crop left pad right", func(d vram.Device) *vram.Tensor {
			return vram.Pad(vec(d, 1, 2, 3), []int{-1, 1}, vram.PadCircular, 0)
		}, vram.Shape{1, 1, 3}, []float64{2, 3, 2}},
		{"pad circular pad left crop right", func(d vram.Device) *vram.Tensor {
			return vram.Pad(vec(d, 1, 2, 3), []int{2, -1}, vram.PadCircular, 0)
		}, vram.Shape{1, 1, 4}, []float64{1, 2, 1, 2}},
		{"pad circular crop 2d", func(d vram.Device) *vram.Tensor {
			return vram.Pad(ar(d, 1, 3, 3), []int{-1, 1, 1, -1}, vram.PadCircular, 0)
		}, vram.Shape{1, 3, 3}, []float64{4, 5, 4, 1, 2, 1, 4, 5, 4}},
		{"pad reflect 2d unbatched", func(d vram.Device) *vram.Tensor {
			return vram.Pad(ar(d, 1, 2, 3).AddScalar(1), []int{1, 1, 1, 0}, vram.PadReflect, 0)
		}, vram.Shape{1, 3, 5}, []float64{5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5}},
		{"pad replicate 2d 2-dim input", func(d vram.Device) *vram.Tensor {
			return vram.Pad(ar(d, 1, 2), []int{1, 0}, vram.PadReplicate, 0)
		}, vram.Shape{1, 3}, []float64{0, 0, 1}},

		{"nearest size 5", func(d vram.Device) *vram.Tensor {
			return vram.Interpolate(vec(d, 0, 10, 20), vram.InterpolateOptions{Size: []int{5}})
		}, vram.Shape{1, 1, 5}, []float64{0, 0, 10, 10, 20}},
		{"nearest-exact size 5", func(d vram.Device) *vram.Tensor {
			return vram.Interpolate(vec(d, 0, 10, 20), vram.InterpolateOptions{Size: []int{5}, Mode: vram.InterpNearestExact})
		}, vram.Shape{1, 1, 5}, []float64{0, 0, 10, 20, 20}},
		{"nearest down", func(d vram.Device) *vram.Tensor {
			return vram.Interpolate(vec(d, 0, 1, 2, 3, 4), vram.InterpolateOptions{Size: []int{2}})
		}, vram.Shape{1, 1, 2}, []float64{0, 2}},
		{"nearest 2d factor 2", func(d vram.Device) *vram.Tensor {
			return vram.Interpolate(ar(d, 1, 1, 2, 2), vram.InterpolateOptions{ScaleFactor: []float64{2}})
		}, vram.Shape{1, 1, 4, 4}, []float64{0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3}},
		{"linear factor 2.5", func(d vram.Device) *vram.Tensor {
			return vram.Interpolate(vec(d, 0, 10, 20), vram.InterpolateOptions{ScaleFactor: []float64{2.5}, Mode: vram.InterpLinear})
		}, vram.Shape{1, 1, 7}, []float64{0, 1, 5, 9, 13, 17, 20}},
		{"linear factor 2.5 recomputed", func(d vram.Device) *vram.Tensor {
			return vram.Interpolate(vec(d, 0, 10, 20), vram.InterpolateOptions{ScaleFactor: []float64{2.5}, Mode: vram.InterpLinear, RecomputeScaleFactor: true})
		}, vram.Shape{1, 1, 7}, []float64{0, 10. / 7, 40. / 7, 10, 100. / 7, 130. / 7, 20}},
		{"linear align corners", func(d vram.Device) *vram.Tensor {
			return vram.Interpolate(vec(d, 0, 10, 20), vram.InterpolateOptions{Size: []int{5}, Mode: vram.InterpLinear, AlignCorners: true})
		}, vram.Shape{1, 1, 5}, []float64{0, 5, 10, 15, 20}},
		{"linear down", func(d vram.Device) *vram.Tensor {
			return vram.Interpolate(vec(d, 0, 10, 20), vram.InterpolateOptions{Size: []int{2}, Mode: vram.InterpLinear})
		}, vram.Shape{1, 1, 2}, []float64{2.5, 17.5}},
		{"linear align corners to 1", func(d vram.Device) *vram.Tensor {
			return vram.Interpolate(vec(d, 0, 10, 20), vram.InterpolateOptions{Size: []int{1}, Mode: vram.InterpLinear, AlignCorners: true})
		}, vram.Shape{1, 1, 1}, []float64{0}},
		{"bilinear factor 2", func(d vram.Device) *vram.Tensor {
			x := vram.FromSlice([]float64{0, 10, 20, 30}, vram.Shape{1, 1, 2, 2}, d)
			return vram.Interpolate(x, vram.InterpolateOptions{ScaleFactor: []float64{2, 2}, Mode: vram.InterpBilinear})
		}, vram.Shape{1, 1, 4, 4}, []float64{0, 2.5, 7.5, 10, 5, 7.5, 12.5, 15, 15, 17.5, 22.5, 25, 20, 22.5, 27.5, 30}},
		{"bilinear align corners", func(d vram.Device) *vram.Tensor {
			x := vram.FromSlice([]float64{0, 10, 20, 30}, vram.Shape{1, 1, 2, 2}, d)
			return vram.Interpolate(x, vram.InterpolateOptions{Size: []int{3, 3}, Mode: vram.InterpBilinear, AlignCorners: true})
		}, vram.Shape{1, 1, 3, 3}, []float64{0, 5, 10, 10, 15, 20, 20, 25, 30}},
		{"bicubic", func(d vram.Device) *vram.Tensor {
			x := vram.FromSlice([]float64{0, 1, 4, 9}, vram.Shape{1, 1, 1, 4}, d)
			return vram.Interpolate(x, vram.InterpolateOptions{Size: []int{1, 2}, Mode: vram.InterpBicubic})
		}, vram.Shape{1, 1, 1, 2}, []float64{0.21875, 6.78125}},
		{"area", func(d vram.Device) *vram.Tensor {
			return vram.Interpolate(vec(d, 0, 1, 2, 3, 4), vram.InterpolateOptions{Size: []int{2}, Mode: vram.InterpArea})
		}, vram.Shape{1, 1, 2}, []float64{1, 3}},
		{"area 2d", func(d vram.Device) *vram.Tensor {
			return vram.Interpolate(ar(d, 1, 1, 2, 4), vram.InterpolateOptions{ScaleFactor: []float64{0.5}, Mode: vram.InterpArea})
		}, vram.Shape{1, 1, 1, 2}, []float64{2.5, 4.5}},
		// Windows of depth: rows 0-1 and 1-2 of 3; each slice of depth is
		// 4 entries, averaged to one.
		{"area 3d", func(d vram.Device) *vram.Tensor {
			return vram.Interpolate(ar(d, 1, 1, 3, 2, 2), vram.InterpolateOptions{Size: []int{2, 1, 1}, Mode: vram.InterpArea})
		}, vram.Shape{1, 1, 2, 1, 1}, []float64{3.5, 7.5}},
		{"trilinear same size", func(d vram.Device) *vram.Tensor {
			return vram.Interpolate(ar(d, 1, 1, 1, 2, 2), vram.InterpolateOptions{Size: []int{1, 2, 2}, Mode: vram.InterpTrilinear})
		}, vram.Shape{1, 1, 1, 2, 2}, []float64{0, 1, 2, 3}},

		{"pixel shuffle", func(d vram.Device) *vram.Tensor { return vram.PixelShuffle(ar(d, 1, 4, 2, 2), 2) },
			vram.Shape{1, 1, 4, 4}, []float64{0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15}},
		{"pixel unshuffle", func(d vram.Device) *vram.Tensor {
			x := vram.FromSlice([]float64{0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15}, vram.Shape{1, 4, 4}, d)
			return vram.PixelUnshuffle(x, 2)
		}, vram.Shape{4, 2, 2}, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},

		{"unfold", func(d vram.Device) *vram.Tensor {
			return vram.Unfold(ar(d, 1, 1, 3, 3), [2]int{2, 2}, vram.FoldParams{})
		},
			vram.Shape{1, 4, 4}, []float64{0, 1, 3, 4, 1, 2, 4, 5, 3, 4, 6, 7, 4, 5, 7, 8}},
		{"unfold padding stride", func(d vram.Device) *vram.Tensor {
			return vram.Unfold(ar(d, 1, 3, 3), [2]int{2, 2}, vram.FoldParams{Padding: [2]int{1, 1}, Stride: [2]int{2, 2}})
		}, vram.Shape{4, 4}, []float64{0, 0, 0, 4, 0, 0, 3, 5, 0, 1, 0, 7, 0, 2, 6, 8}},
		{"unfold dilation", func(d vram.Device) *vram.Tensor {
			return vram.Unfold(ar(d, 1, 1, 3, 3), [2]int{2, 2}, vram.FoldParams{Dilation: [2]int{2, 2}})
		}, vram.Shape{1, 4, 1}, []float64{0, 2, 6, 8}},
		{"fold of unfold counts", func(d vram.Device) *vram.Tensor {
			ones := vram.Ones(vram.Shape{1, 1, 3, 3}, d, vram.Float64)
			return vram.Fold(vram.Unfold(ones, [2]int{2, 2}, vram.FoldParams{}), [2]int{3, 3}, [2]int{2, 2}, vram.FoldParams{})
		}, vram.Shape{1, 1, 3, 3}, []float64{1, 2, 1, 2, 4, 2, 1, 2, 1}},
		{"fold padding stride unbatched", func(d vram.Device) *vram.Tensor {
			cols := vram.FromSlice([]float64{0, 0, 0, 4, 0, 0, 3, 5, 0, 1, 0, 7, 0, 2, 6, 8}, vram.Shape{4, 4}, d)
			return vram.Fold(cols, [2]int{3, 3}, [2]int{2, 2}, vram.FoldParams{Padding: [2]int{1, 1}, Stride: [2]int{2, 2}})
		}, vram.Shape{1, 3, 3}, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8}},

		{"tensor unfold", func(d vram.Device) *vram.Tensor { return ar(d, 7).Unfold(0, 3, 2) },
			vram.Shape{3, 3}, []float64{0, 1, 2, 2, 3, 4, 4, 5, 6}},
		{"tensor unfold last", func(d vram.Device) *vram.Tensor { return ar(d, 2, 3).Unfold(1, 2, 1) },
			vram.Shape{2, 2, 2}, []float64{0, 1, 1, 2, 3, 4, 4, 5}},
		{"tensor unfold first", func(d vram.Device) *vram.Tensor { return ar(d, 2, 3).Unfold(0, 2, 1) },
			vram.Shape{1, 3, 2}, []float64{0, 3, 1, 4, 2, 5}},
		{"tensor unfold leftover", func(d vram.Device) *vram.Tensor { return ar(d, 5).Unfold(-1, 2, 2) },
			vram.Shape{2, 2}, []float64{0, 1, 2, 3}},
		{"tensor unfold scalar", func(d vram.Device) *vram.Tensor { return vram.Full(nil, 5, d, vram.Float64).Unfold(0, 1, 1) },
			vram.Shape{1}, []float64{5}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				memtest.Settle(dev)
				before := vram.MemoryAllocated(dev)
				vram.Tidy(func() {
					y := c.op(dev)
					got := y.Float64s()
					if !slices.Equal(y.Shape(), c.shape) || len(got) != len(c.want) {
						t.Fatalf("got %v %v, want %v %v", y.Shape(), got, c.shape, c.want)
					}
					for i := range got {
						if math.Abs(got[i]-c.want[i]) > 1e-12 {
							t.Fatalf("got %v, want %v", got, c.want)
						}
					}
				})
				if after := vram.MemoryAllocated(dev); after != before {
					t.Errorf("%d bytes still allocated after releasing everything", after-before)
				}
			})
		}
	}
}

// TestResizeOpsErrors checks that bad arguments panic with the documented
// kinds, which Catch returns, and leave the input as it was.
func TestResizeOpsErrors(t *testing.T) {
	cases := []struct {
		name string
		op   func(x3, x4 *vram.Tensor)
		kind error
	}{
		{"pad odd", func(x3, _ *vram.Tensor) { vram.Pad(x3, []int{1}, vram.PadConstant, 0) }, vram.ErrArgument},
		{"pad too long", func(x3, _ *vram.Tensor) { vram.Pad(x3, make([]int, 8), vram.PadConstant, 0) }, vram.ErrArgument},
		{"pad value with reflect", func(x3, _ *vram.Tensor) { vram.Pad(x3, []int{1, 1}, vram.PadReflect, 1) }, vram.ErrArgument},
		{"pad bad mode", func(x3, _ *vram.Tensor) { vram.Pad(x3, []int{1, 1}, vram.PadMode(9), 0) }, vram.ErrArgument},
		{"pad reflect too far", func(x3, _ *vram.Tensor) { vram.Pad(x3, []int{3, 0}, vram.PadReflect, 0) }, vram.ErrShape},
		{"pad circular twice round", func(x3, _ *vram.Tensor) { vram.Pad(x3, []int{0, 4}, vram.PadCircular, 0) }, vram.ErrShape},
		{"pad circular round the cropped size", func(x3, _ *vram.Tensor) { vram.Pad(x3, []int{-2, 2}, vram.PadCircular, 0) }, vram.ErrShape},
		{"pad replicate empty", func(x3, _ *vram.Tensor) { vram.Pad(x3, []int{-2, -1}, vram.PadReplicate, 0) }, vram.ErrShape},
		{"pad constant negative size", func(x3, _ *vram.Tensor) { vram.Pad(x3, []int{-2, -2}, vram.PadConstant, 0) }, vram.ErrShape},
		{"pad reflect 1d input", func(x3, _ *vram.Tensor) { vram.Pad(x3.Reshape(3), []int{1, 1}, vram.PadReflect, 0) }, vram.ErrShape},
		{"pad reflect 4 dims", func(_, x4 *vram.Tensor) { vram.Pad(x4, make([]int, 8), vram.PadReflect, 0) }, vram.ErrShape},
		{"pad huge", func(x3, _ *vram.Tensor) { vram.Pad(x3, []int{1 << 40, 0}, vram.PadConstant, 0) }, vram.ErrShape},
		{"pad overflow", func(x3, _ *vram.Tensor) { vram.Pad(x3, []int{math.MaxInt, math.MaxInt}, vram.PadConstant, 0) }, vram.ErrShape},
		{"interp huge", func(x3, _ *vram.Tensor) { vram.Interpolate(x3, vram.InterpolateOptions{Size: []int{1 << 40}}) }, vram.ErrShape},
		{"interp huge factor", func(x3, _ *vram.Tensor) { vram.Interpolate(x3, vram.InterpolateOptions{ScaleFactor: []float64{1e300}}) }, vram.ErrShape},
		{"interp none", func(x3, _ *vram.Tensor) { vram.Interpolate(x3, vram.InterpolateOptions{}) }, vram.ErrArgument},
		{"interp both", func(x3, _ *vram.Tensor) {
			vram.Interpolate(x3, vram.InterpolateOptions{Size: []int{4}, ScaleFactor: []float64{2}})
		}, vram.ErrArgument},
		{"interp 2d input", func(x3, _ *vram.Tensor) { vram.Interpolate(x3.Reshape(1, 3), vram.InterpolateOptions{Size: []int{4}}) }, vram.ErrShape},
		{"interp bilinear 3d", func(x3, _ *vram.Tensor) {
			vram.Interpolate(x3, vram.InterpolateOptions{Size: []int{4}, Mode: vram.InterpBilinear})
		}, vram.ErrShape},
		{"interp align nearest", func(x3, _ *vram.Tensor) {
			vram.Interpolate(x3, vram.InterpolateOptions{Size: []int{4}, AlignCorners: true})
		}, vram.ErrArgument},
		{"interp recompute with size", func(x3, _ *vram.Tensor) {
			vram.Interpolate(x3, vram.InterpolateOptions{Size: []int{4}, RecomputeScaleFactor: true})
		}, vram.ErrArgument},
		{"interp align area", func(x3, _ *vram.Tensor) {
			vram.Interpolate(x3, vram.InterpolateOptions{Size: []int{2}, Mode: vram.InterpArea, AlignCorners: true})
		}, vram.ErrArgument},
		{"interp size length", func(_, x4 *vram.Tensor) { vram.Interpolate(x4, vram.InterpolateOptions{Size: []int{4, 4, 4}}) }, vram.ErrShape},
		{"interp zero size", func(x3, _ *vram.Tensor) { vram.Interpolate(x3, vram.InterpolateOptions{Size: []int{0}}) }, vram.ErrShape},
		{"interp small factor", func(x3, _ *vram.Tensor) { vram.Interpolate(x3, vram.InterpolateOptions{ScaleFactor: []float64{0.2}}) }, vram.ErrShape},
		{"interp negative factor", func(x3, _ *vram.Tensor) { vram.Interpolate(x3, vram.InterpolateOptions{ScaleFactor: []float64{-2}}) }, vram.ErrArgument},
		{"interp NaN factor", func(x3, _ *vram.Tensor) {
			vram.Interpolate(x3, vram.InterpolateOptions{ScaleFactor: []float64{math.NaN()}})
		}, vram.ErrArgument},
		{"interp linear int", func(x3, _ *vram.Tensor) {
			vram.Interpolate(x3.Cast(vram.Int64), vram.InterpolateOptions{Size: []int{4}, Mode: vram.InterpLinear})
		}, vram.ErrDType},
		{"shuffle channels", func(_, x4 *vram.Tensor) { vram.PixelShuffle(x4, 2) }, vram.ErrShape},
		{"shuffle factor", func(_, x4 *vram.Tensor) { vram.PixelShuffle(x4, 0) }, vram.ErrArgument},
		{"shuffle 2d", func(x3, _ *vram.Tensor) { vram.PixelShuffle(x3.Reshape(1, 3), 1) }, vram.ErrShape},
		{"unshuffle size", func(_, x4 *vram.Tensor) { vram.PixelUnshuffle(x4, 2) }, vram.ErrShape},
		{"unfold rank", func(x3, _ *vram.Tensor) { vram.Unfold(x3.Reshape(3), [2]int{1, 1}, vram.FoldParams{}) }, vram.ErrShape},
		{"unfold kernel too big", func(_, x4 *vram.Tensor) { vram.Unfold(x4, [2]int{4, 1}, vram.FoldParams{}) }, vram.ErrShape},
		{"unfold zero kernel", func(_, x4 *vram.Tensor) { vram.Unfold(x4, [2]int{0, 1}, vram.FoldParams{}) }, vram.ErrArgument},
		{"unfold negative padding", func(_, x4 *vram.Tensor) {
			vram.Unfold(x4, [2]int{1, 1}, vram.FoldParams{Padding: [2]int{-1, 0}})
		}, vram.ErrArgument},
		{"fold blocks", func(x3, _ *vram.Tensor) {
			vram.Fold(x3.Reshape(1, 1, 3), [2]int{3, 3}, [2]int{1, 1}, vram.FoldParams{})
		}, vram.ErrShape},
		{"fold divisible", func(x3, _ *vram.Tensor) {
			vram.Fold(x3.Reshape(1, 3, 1), [2]int{1, 1}, [2]int{1, 2}, vram.FoldParams{})
		}, vram.ErrShape},
		{"fold kernel of 2^64 taps", func(x3, _ *vram.Tensor) {
			// 2^31·2^33 taps wrap an int to 0: refused before the
			// channels are divided by it.
			vram.Fold(x3.Reshape(1, 1, 3), [2]int{1 << 31, 1 << 40}, [2]int{1 << 31, 1 << 33}, vram.FoldParams{})
		}, vram.ErrShape},
		{"unfold kernel of 2^64 taps on an empty input", func(x3, _ *vram.Tensor) {
			vram.Unfold(vram.Zeros(vram.Shape{0, 1, 1 << 31, 1 << 33}), [2]int{1 << 31, 1 << 33}, vram.FoldParams{})
		}, vram.ErrShape},
		{"fold int", func(x3, _ *vram.Tensor) {
			vram.Fold(x3.Reshape(1, 1, 3).Cast(vram.Int64), [2]int{1, 3}, [2]int{1, 1}, vram.FoldParams{})
		}, vram.ErrDType},
		{"tensor unfold size", func(x3, _ *vram.Tensor) { x3.Unfold(2, 4, 1) }, vram.ErrArgument},
		{"tensor unfold step", func(x3, _ *vram.Tensor) { x3.Unfold(2, 1, 0) }, vram.ErrArgument},
		{"tensor unfold dim", func(x3, _ *vram.Tensor) { x3.Unfold(3, 1, 1) }, vram.ErrIndex},
		{"tensor unfold scalar", func(x3, _ *vram.Tensor) { vram.Scalar(1, vram.Float64).Unfold(0, 2, 1) }, vram.ErrArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vram.Tidy(func() {
				x3 := vram.FromSlice([]float64{1, 2, 3}, vram.Shape{1, 1, 3})
				x4 := vram.Arange(0, 9, 1, vram.Float64).Reshape(1, 1, 3, 3)
				err := vram.Catch(func() { c.op(x3, x4) })
				if !errors.Is(err, c.kind) {
					t.Fatalf("got %v, want an error of kind %v", err, c.kind)
				}
				if got := x3.Float64s(); !slices.Equal(got, []float64{1, 2, 3}) {
					t.Errorf("input changed to %v", got)
				}
			})
		})
	}
}

// TestTensorUnfoldShares checks that Tensor.Unfold is a view: a write
// through the input shows in every window holding that entry.
func TestTensorUnfoldShares(t *testing.T) {
	vram.Tidy(func() {
		x := vram.Arange(0, 5, 1, vram.Float64)
		u := x.Unfold(0, 3, 1)
		if !u.SharesStorage(x) {
			t.Fatal("unfold copied its input")
		}
		x.Narrow(0, 2, 1).FillInPlace(9)
		if got, want := u.Float64s(), []float64{0, 1, 9, 1, 9, 3, 9, 3, 4}; !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

// TestResizeKeepsChannelsLast checks that Pad, Interpolate, PixelShuffle
// and PixelUnshuffle keep a channels-last input's layout, as PyTorch does,
// with the same values.
func TestResizeKeepsChannelsLast(t *testing.T) {
	ops := []struct {
		name string
		f    func(x *vram.Tensor) *vram.Tensor
	}{
		{"pad", func(x *vram.Tensor) *vram.Tensor { return vram.Pad(x, []int{1, 0, 0, 1}, vram.PadConstant, 0) }},
		{"pad reflect", func(x *vram.Tensor) *vram.Tensor { return vram.Pad(x, []int{1, 1, 1, 1}, vram.PadReflect, 0) }},
		{"nearest", func(x *vram.Tensor) *vram.Tensor {
			return vram.Interpolate(x, vram.InterpolateOptions{Size: []int{3, 3}})
		}},
		{"bilinear", func(x *vram.Tensor) *vram.Tensor {
			return vram.Interpolate(x, vram.InterpolateOptions{ScaleFactor: []float64{2}, Mode: vram.InterpBilinear})
		}},
		{"pixel shuffle", func(x *vram.Tensor) *vram.Tensor { return vram.PixelShuffle(x, 2) }},
		{"pixel unshuffle", func(x *vram.Tensor) *vram.Tensor { return vram.PixelUnshuffle(x, 2) }},
	}
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			vram.Tidy(func() {
				x := vram.Arange(0, 128, 1, vram.Float32).Reshape(1, 8, 4, 4)
				want := o.f(x).Float64s()
				y := o.f(x.Contiguous(vram.ChannelsLast))
				if f := y.SuggestMemoryFormat(); f != vram.ChannelsLast {
					t.Errorf("result is %v, want channels-last", f)
				}
				if got := y.Float64s(); !slices.Equal(got, want) {
					t.Errorf("got %v, want %v", got, want)
				}
			})
		})
	}
}

// TestPixelShuffleOverflow checks that a factor whose square, or whose
// product with the height or width, overflows an int is refused with
// vram.ErrShape, where vram.PixelShuffle divided by zero (a runtime panic) and
// vram.PixelUnshuffle could reshape to a wrapped-around channel count.
func TestPixelShuffleOverflow(t *testing.T) {
	x := vram.Zeros(vram.Shape{1, 4, 2, 2})
	defer x.Release()
	noChannels := vram.Zeros(vram.Shape{1, 0, 2, 2})
	defer noChannels.Release()
	empty := vram.Zeros(vram.Shape{1, 1, 0, 0})
	defer empty.Release()
	for _, tc := range []struct {
		name string
		fn   func()
		op   string
	}{
		{"shuffle square wraps to 0", func() { vram.PixelShuffle(x, 1<<32) }, "pixel_shuffle"},
		{"shuffle square overflows", func() { vram.PixelShuffle(x, 1<<40) }, "pixel_shuffle"},
		{"shuffle no channels, width overflows", func() { vram.PixelShuffle(noChannels, 1<<62) }, "pixel_shuffle"},
		{"unshuffle empty image, channels overflow", func() { vram.PixelUnshuffle(empty, 1<<32) }, "pixel_unshuffle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(func() { vram.Tidy(tc.fn) })
			var e *vram.Error
			if !errors.Is(err, vram.ErrShape) || !errors.As(err, &e) || e.Op != tc.op {
				t.Errorf("got %v, want an vram.ErrShape of %s", err, tc.op)
			}
		})
	}
}

// TestFoldErrorNamesDefaults checks that Fold's block-count error names the
// dilation and stride it used, 1 for a zero field, not the zeros given.
func TestFoldErrorNamesDefaults(t *testing.T) {
	x := vram.Zeros(vram.Shape{1, 4, 3})
	defer x.Release()
	for _, tc := range []struct {
		name string
		p    vram.FoldParams
		want string
	}{
		{"zero fields", vram.FoldParams{}, "dilation [1 1], padding [0 0] and stride [1 1]"},
		{"given fields", vram.FoldParams{Dilation: [2]int{2, 1}, Stride: [2]int{2, 1}}, "dilation [2 1], padding [0 0] and stride [2 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(func() { vram.Fold(x, [2]int{3, 2}, [2]int{2, 1}, tc.p) })
			if !errors.Is(err, vram.ErrShape) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an ErrShape naming %q", err, tc.want)
			}
		})
	}
}

// TestFoldIsContiguous checks that Fold gives a contiguous image, as
// torch.nn.functional.fold does, so that a View of it works: it gave a
// view of its accumulator, which holds a slot for the padding after each
// plane, and View(n, -1) of an image of several channels panicked.
func TestFoldIsContiguous(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape vram.Shape
		dt    vram.DType
	}{
		{"float32", vram.Shape{2, 8, 4}, vram.Float32},
		{"float64", vram.Shape{2, 8, 4}, vram.Float64},
		{"float16", vram.Shape{2, 8, 4}, vram.Float16},
		{"unbatched", vram.Shape{8, 4}, vram.Float32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vram.Tidy(func() {
				y := vram.Fold(vram.Ones(tc.shape, tc.dt), [2]int{3, 3}, [2]int{2, 2}, vram.FoldParams{})
				if !y.IsContiguous() {
					t.Fatalf("fold gave shape %v with strides %v, not contiguous", y.Shape(), y.Strides())
				}
				// Each pixel of the 3x3 image is covered by as many 2x2
				// blocks as it has neighbours in each direction.
				cover := []float64{1, 2, 1, 2, 4, 2, 1, 2, 1}
				got := y.View(-1).Float64s()
				for i, v := range got {
					if v != cover[i%9] {
						t.Fatalf("entry %d is %v, want %v", i, v, cover[i%9])
					}
				}
			})
		})
	}
}
