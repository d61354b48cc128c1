package vram

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
)

// refUnpool is torch.nn.functional.max_unpool2d computed directly, as
// PyTorch's CPU kernel does: zeros of [N, C, oh, ow], each value of x
// written at the position of its plane that its index names, a later
// entry of a plane overwriting an earlier one.
func refUnpool(x []float64, idx []int64, xs []int, oh, ow int) []float64 {
	planes, l := xs[0]*xs[1], xs[2]*xs[3]
	out := make([]float64, planes*oh*ow)
	for p := range planes {
		for j := range l {
			out[p*oh*ow+int(idx[p*l+j])] = x[p*l+j]
		}
	}
	return out
}

// unpoolCases pool an input with indices and undo the pooling: the
// default size (H-1)·Stride - 2·Padding + Kernel, or a size given, which
// PyTorch takes strictly between the default less and plus the stride.
var unpoolCases = []struct {
	name string
	x    []int
	p    Pool2dParams
	size [2]int
	want [2]int // the output's height and width
}{
	{"2x2 stride 2", []int{2, 3, 6, 4}, Pool2dParams{Kernel: [2]int{2, 2}}, [2]int{}, [2]int{6, 4}},
	{"odd size restored", []int{2, 3, 7, 5}, Pool2dParams{Kernel: [2]int{2, 2}}, [2]int{7, 5}, [2]int{7, 5}},
	{"one axis given", []int{1, 2, 7, 6}, Pool2dParams{Kernel: [2]int{2, 2}}, [2]int{7, 0}, [2]int{7, 6}},
	{"overlapping windows", []int{2, 2, 5, 5}, Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{1, 1}}, [2]int{}, [2]int{5, 5}},
	{"padded", []int{1, 2, 5, 5}, Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, [2]int{}, [2]int{5, 5}},
	{"ceil mode, size given", []int{1, 2, 5, 5}, Pool2dParams{Kernel: [2]int{2, 2}, CeilMode: true}, [2]int{5, 5}, [2]int{5, 5}},
	{"non-square", []int{1, 1, 6, 9}, Pool2dParams{Kernel: [2]int{2, 3}}, [2]int{}, [2]int{6, 9}},
}

// TestMaxUnpool2d checks MaxUnpool2d of what MaxPool2dWithIndices gives
// against the direct computation, batched and unbatched, in both memory
// formats (the output keeps x's), on the CPU and a sim device, and its
// gradient: each entry of x gets the output's gradient at its position,
// duplicates included, as PyTorch's max_unpool2d backward gathers it.
func TestMaxUnpool2d(t *testing.T) {
	for _, tc := range unpoolCases {
		t.Run(tc.name, func(t *testing.T) {
			pooled, idx := MaxPool2dWithIndices(rnd(41, tc.x...), tc.p)
			xs := pooled.Shape()
			want := refUnpool(pooled.Float64s(), idx.Int64s(), xs, tc.want[0], tc.want[1])
			wantShape := Shape{xs[0], xs[1], tc.want[0], tc.want[1]}
			for _, d := range []Device{CPU, Sim(0)} {
				if !d.Available() {
					continue
				}
				x, ix := pooled.To(d), idx.To(d)
				for _, cl := range []bool{false, true} {
					in := x
					if cl {
						in = x.Contiguous(ChannelsLast)
					}
					var y *Tensor
					if err := Catch(func() { y = MaxUnpool2d(in, ix, tc.p, tc.size) }); err != nil {
						t.Fatalf("%s: %v", d, err)
					}
					if !slices.Equal(y.Shape(), wantShape) || y.Device() != d {
						t.Fatalf("%s: shape %v on %s, want %v", d, y.Shape(), y.Device(), wantShape)
					}
					if cl != (y.SuggestMemoryFormat() == ChannelsLast) {
						t.Errorf("%s: channels-last input %v gave strides %v", d, cl, y.Strides())
					}
					closeTo(t, fmt.Sprintf("%s channels-last=%v", d, cl), y.Float64s(), want, 0)
				}
				yu := MaxUnpool2d(x.Select(0, 0), ix.Select(0, 0), tc.p, tc.size)
				plane := xs[1] * tc.want[0] * tc.want[1]
				closeTo(t, fmt.Sprintf("%s unbatched", d), yu.Float64s(), want[:plane], 0)
			}
			// The gradient of sum(y·r) is r at each entry's position.
			r := rnd(42, int(wantShape[0]), int(wantShape[1]), tc.want[0], tc.want[1])
			xg := pooled.Detach().SetRequiresGrad(true)
			MaxUnpool2d(xg, idx, tc.p, tc.size).Mul(r).Sum().Backward()
			rs, is := r.Float64s(), idx.Int64s()
			gw := make([]float64, len(is))
			l, ol := xs[2]*xs[3], tc.want[0]*tc.want[1]
			for j, q := range is {
				gw[j] = rs[j/l*ol+int(q)]
			}
			closeTo(t, "gradient", xg.Grad().Float64s(), gw, 0)
		})
	}
	t.Run("empty batch", func(t *testing.T) {
		y := MaxUnpool2d(Zeros(Shape{0, 2, 3, 3}), Zeros(Shape{0, 2, 3, 3}, Int64), Pool2dParams{Kernel: [2]int{2, 2}}, [2]int{})
		if !slices.Equal(y.Shape(), Shape{0, 2, 6, 6}) {
			t.Errorf("shape %v, want [0, 2, 6, 6]", y.Shape())
		}
	})
	t.Run("duplicates take the last entry", func(t *testing.T) {
		// Positions named twice are undefined in PyTorch's docs; its CPU
		// kernel writes the entries in order, so the last one stays.
		x := FromSlice([]float64{1, 2, 3, 4}, Shape{1, 1, 2, 2})
		idx := FromSlice([]int64{5, 5, 0, 5}, Shape{1, 1, 2, 2})
		y := MaxUnpool2d(x, idx, Pool2dParams{Kernel: [2]int{2, 2}}, [2]int{})
		want := make([]float64, 16)
		want[0], want[5] = 3, 4
		closeTo(t, "values", y.Float64s(), want, 0)
	})
}

// TestMaxUnpool2dErrors checks what PyTorch refuses (indices that are not
// int64 or not of x's shape, an index outside the output plane, an output
// size out of reach) and sizes whose arithmetic would overflow.
func TestMaxUnpool2dErrors(t *testing.T) {
	x := rnd(43, 1, 2, 3, 3)
	idx := Zeros(Shape{1, 2, 3, 3}, Int64)
	k2 := Pool2dParams{Kernel: [2]int{2, 2}}
	for _, tc := range []struct {
		name string
		f    func()
		kind error
	}{
		{"int32 indices", func() { MaxUnpool2d(x, idx.Cast(Int32), k2, [2]int{}) }, ErrDType},
		{"indices of another shape", func() { MaxUnpool2d(x, Zeros(Shape{1, 2, 3, 2}, Int64), k2, [2]int{}) }, ErrShape},
		{"2-D input", func() { MaxUnpool2d(rnd(44, 3, 3), Zeros(Shape{3, 3}, Int64), k2, [2]int{}) }, ErrShape},
		{"index past the plane", func() { MaxUnpool2d(x, Full(Shape{1, 2, 3, 3}, 36, Int64), k2, [2]int{}) }, ErrIndex},
		{"negative index", func() { MaxUnpool2d(x, Full(Shape{1, 2, 3, 3}, -1, Int64), k2, [2]int{}) }, ErrIndex},
		{"size at default plus stride", func() { MaxUnpool2d(x, idx, k2, [2]int{8, 6}) }, ErrShape},
		{"size at default less stride", func() { MaxUnpool2d(x, idx, k2, [2]int{6, 4}) }, ErrShape},
		{"negative size", func() { MaxUnpool2d(x, idx, k2, [2]int{-1, 6}) }, ErrShape},
		{"zero kernel", func() { MaxUnpool2d(x, idx, Pool2dParams{Kernel: [2]int{0, 2}}, [2]int{}) }, ErrArgument},
		{"negative stride", func() { MaxUnpool2d(x, idx, Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{-2, 2}}, [2]int{}) }, ErrArgument},
		{"negative padding", func() { MaxUnpool2d(x, idx, Pool2dParams{Kernel: [2]int{2, 2}, Padding: [2]int{0, -1}}, [2]int{}) }, ErrArgument},
		{"empty output", func() {
			MaxUnpool2d(rnd(45, 1, 1, 1, 1), Zeros(Shape{1, 1, 1, 1}, Int64), Pool2dParams{Kernel: [2]int{1, 1}, Padding: [2]int{1, 0}}, [2]int{})
		}, ErrShape},
		{"stride overflowing the size", func() {
			MaxUnpool2d(x, idx, Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{math.MaxInt, 2}}, [2]int{})
		}, ErrShape},
		{"output too large for the host index", func() {
			MaxUnpool2d(x, idx, Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{1 << 20, 1 << 20}}, [2]int{})
		}, ErrShape},
		{"nil indices", func() { MaxUnpool2d(x, nil, k2, [2]int{}) }, ErrArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Catch(tc.f); !errors.Is(err, tc.kind) {
				t.Errorf("error %v, want %v", err, tc.kind)
			}
		})
	}
}
