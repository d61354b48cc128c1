package vram

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// iota6 returns [[0 1 2] [3 4 5]] on dev.
func iota6(dev Device) *Tensor {
	return FromSlice([]float32{0, 1, 2, 3, 4, 5}, Shape{2, 3}, dev)
}

// TestSplitAndRepeatOps pins the shapes and values of Chunk, Split,
// SplitSizes, Unbind, Unflatten, Repeat, Tile and MaskedFill, with
// torch's results, on the CPU and on a simulated GPU, and checks that the
// split ops return views of their input.
func TestSplitAndRepeatOps(t *testing.T) {
	mask := func(dev Device) *Tensor { return FromSlice([]bool{true, false, true}, Shape{3}, dev) }
	tests := []struct {
		name   string
		fn     func(x *Tensor) []*Tensor
		views  bool
		shapes []Shape
		values [][]float32
	}{
		{"chunk 3 in 2", func(x *Tensor) []*Tensor { return x.Chunk(2, 1) }, true,
			[]Shape{{2, 2}, {2, 1}}, [][]float32{{0, 1, 3, 4}, {2, 5}}},
		{"chunk more than the size", func(x *Tensor) []*Tensor { return x.Chunk(5, -1) }, true,
			[]Shape{{2, 1}, {2, 1}, {2, 1}}, [][]float32{{0, 3}, {1, 4}, {2, 5}}},
		{"chunk the largest count", func(x *Tensor) []*Tensor { return x.Chunk(math.MaxInt, 0) }, true,
			[]Shape{{1, 3}, {1, 3}}, [][]float32{{0, 1, 2}, {3, 4, 5}}},
		{"chunk 6 in 4 gives 3", func(x *Tensor) []*Tensor { return x.Reshape(6).Chunk(4, 0) }, true,
			[]Shape{{2}, {2}, {2}}, [][]float32{{0, 1}, {2, 3}, {4, 5}}},
		{"chunk an empty dimension", func(x *Tensor) []*Tensor { return x.Narrow(1, 0, 0).Chunk(3, 1) }, true,
			[]Shape{{2, 0}, {2, 0}, {2, 0}}, [][]float32{{}, {}, {}}},
		{"split", func(x *Tensor) []*Tensor { return x.Split(2, 1) }, true,
			[]Shape{{2, 2}, {2, 1}}, [][]float32{{0, 1, 3, 4}, {2, 5}}},
		{"split larger than the size", func(x *Tensor) []*Tensor { return x.Split(math.MaxInt, 1) }, true,
			[]Shape{{2, 3}}, [][]float32{{0, 1, 2, 3, 4, 5}}},
		{"split an empty dimension", func(x *Tensor) []*Tensor { return x.Narrow(0, 2, 0).Split(0, 0) }, true,
			[]Shape{{0, 3}}, [][]float32{{}}},
		{"split of a transpose", func(x *Tensor) []*Tensor { return x.T().Split(1, 1) }, true,
			[]Shape{{3, 1}, {3, 1}}, [][]float32{{0, 1, 2}, {3, 4, 5}}},
		{"split sizes", func(x *Tensor) []*Tensor { return x.SplitSizes([]int{1, 0, 2}, -1) }, true,
			[]Shape{{2, 1}, {2, 0}, {2, 2}}, [][]float32{{0, 3}, {}, {1, 2, 4, 5}}},
		{"unbind", func(x *Tensor) []*Tensor { return x.Unbind(-1) }, true,
			[]Shape{{2}, {2}, {2}}, [][]float32{{0, 3}, {1, 4}, {2, 5}}},
		{"unbind an empty dimension", func(x *Tensor) []*Tensor { return x.Narrow(0, 0, 0).Unbind(0) }, true,
			[]Shape{}, [][]float32{}},
		{"unflatten", func(x *Tensor) []*Tensor { return []*Tensor{x.Unflatten(1, 3, 1)} }, true,
			[]Shape{{2, 3, 1}}, [][]float32{{0, 1, 2, 3, 4, 5}}},
		{"unflatten a transpose, inferred", func(x *Tensor) []*Tensor { return []*Tensor{x.T().Unflatten(0, 1, -1)} }, true,
			[]Shape{{1, 3, 2}}, [][]float32{{0, 3, 1, 4, 2, 5}}},
		{"repeat", func(x *Tensor) []*Tensor { return []*Tensor{x.Repeat(2, 1, 2)} }, false,
			[]Shape{{2, 2, 6}}, [][]float32{{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}}},
		{"repeat zero times", func(x *Tensor) []*Tensor { return []*Tensor{x.Repeat(0, 2)} }, false,
			[]Shape{{0, 6}}, [][]float32{{}}},
		{"repeat an empty tensor the largest number of times", func(x *Tensor) []*Tensor { return []*Tensor{x.Narrow(0, 0, 0).Repeat(math.MaxInt, 1)} }, false,
			[]Shape{{0, 3}}, [][]float32{{}}},
		{"repeat an empty tensor with a new dimension", func(x *Tensor) []*Tensor { return []*Tensor{x.Narrow(0, 0, 0).Repeat(1<<40, 1<<30, 1)} }, false,
			[]Shape{{1 << 40, 0, 3}}, [][]float32{{}}},
		{"repeat zero times beside a large count", func(x *Tensor) []*Tensor { return []*Tensor{x.Repeat(1<<40, 0)} }, false,
			[]Shape{{1 << 41, 0}}, [][]float32{{}}},
		{"repeat a transpose", func(x *Tensor) []*Tensor { return []*Tensor{x.T().Repeat(1, 2)} }, false,
			[]Shape{{3, 4}}, [][]float32{{0, 3, 0, 3, 1, 4, 1, 4, 2, 5, 2, 5}}},
		{"repeat a 0-d tensor", func(x *Tensor) []*Tensor { return []*Tensor{x.Select(1, 2).Select(0, 1).Repeat(3)} }, false,
			[]Shape{{3}}, [][]float32{{5, 5, 5}}},
		{"tile with fewer reps", func(x *Tensor) []*Tensor { return []*Tensor{x.Tile(2)} }, false,
			[]Shape{{2, 6}}, [][]float32{{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}}},
		{"masked fill", func(x *Tensor) []*Tensor { return []*Tensor{x.MaskedFill(x.GtScalar(3), -1)} }, false,
			[]Shape{{2, 3}}, [][]float32{{0, 1, 2, 3, -1, -1}}},
		{"masked fill, mask broadcast", func(x *Tensor) []*Tensor { return []*Tensor{x.MaskedFill(mask(x.Device()), 9)} }, false,
			[]Shape{{2, 3}}, [][]float32{{9, 1, 9, 9, 4, 9}}},
		{"masked fill, 0-d CPU mask", func(x *Tensor) []*Tensor { return []*Tensor{x.MaskedFill(Full(nil, 1, Bool), 7)} }, false,
			[]Shape{{2, 3}}, [][]float32{{7, 7, 7, 7, 7, 7}}},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				Tidy(func() {
					x := iota6(dev)
					got := tc.fn(x)
					if len(got) != len(tc.shapes) {
						t.Fatalf("%d tensors, want %d", len(got), len(tc.shapes))
					}
					for i, g := range got {
						if !slices.Equal(g.Shape(), tc.shapes[i]) {
							t.Errorf("tensor %d: shape %v, want %v", i, g.Shape(), tc.shapes[i])
						}
						if v := g.Float32s(); !slices.Equal(v, tc.values[i]) {
							t.Errorf("tensor %d: values %v, want %v", i, v, tc.values[i])
						}
						if g.Device() != dev {
							t.Errorf("tensor %d on %v, want %v", i, g.Device(), dev)
						}
						if g.SharesStorage(x) != tc.views {
							t.Errorf("tensor %d shares x's storage: %v, want %v", i, g.SharesStorage(x), tc.views)
						}
					}
				})
			})
		}
	}
}

// TestSplitAndRepeatErrors checks that bad arguments to the split,
// repeat and mask ops panic with an *Error of the right kind naming the
// operation called, and leave nothing allocated.
func TestSplitAndRepeatErrors(t *testing.T) {
	tests := []struct {
		name string
		op   string
		kind error
		fn   func(x *Tensor)
	}{
		{"chunk 0", "chunk", ErrArgument, func(x *Tensor) { x.Chunk(0, 0) }},
		{"chunk negative", "chunk", ErrArgument, func(x *Tensor) { x.Chunk(-1, 0) }},
		{"chunk dim out of range", "chunk", ErrIndex, func(x *Tensor) { x.Chunk(2, 2) }},
		{"chunk a 0-d tensor", "chunk", ErrIndex, func(x *Tensor) { x.Sum().Chunk(1, 0) }},
		{"split negative", "split", ErrArgument, func(x *Tensor) { x.Split(-2, 1) }},
		{"split 0 of a full dimension", "split", ErrArgument, func(x *Tensor) { x.Split(0, 1) }},
		{"split dim out of range", "split", ErrIndex, func(x *Tensor) { x.Split(1, math.MinInt) }},
		{"split sizes short", "split_with_sizes", ErrArgument, func(x *Tensor) { x.SplitSizes([]int{1, 1}, 1) }},
		{"split sizes negative", "split_with_sizes", ErrArgument, func(x *Tensor) { x.SplitSizes([]int{4, -1}, 1) }},
		{"split sizes overflow", "split_with_sizes", ErrArgument, func(x *Tensor) { x.SplitSizes([]int{math.MaxInt, math.MaxInt, 5}, 1) }},
		{"unbind a 0-d tensor", "unbind", ErrIndex, func(x *Tensor) { x.Sum().Unbind(0) }},
		// Views of empty tensors are counts no data bounds: refused before
		// a host slice of that length is made.
		{"chunk an empty dimension into 2^40", "chunk", ErrArgument, func(x *Tensor) { x.Narrow(1, 0, 0).Chunk(1<<40, 1) }},
		{"chunk an empty dimension into MaxInt", "chunk", ErrArgument, func(x *Tensor) { x.Narrow(1, 0, 0).Chunk(math.MaxInt, -1) }},
		{"chunk [2^40, 0] into 2^40", "chunk", ErrArgument, func(x *Tensor) { Zeros(Shape{1 << 40, 0}, x.Device()).Chunk(1<<40, 0) }},
		{"split [2^40, 0] by 1", "split", ErrArgument, func(x *Tensor) { Zeros(Shape{1 << 40, 0}, x.Device()).Split(1, 0) }},
		{"unbind [2^40, 0]", "unbind", ErrArgument, func(x *Tensor) { Zeros(Shape{1 << 40, 0}, x.Device()).Unbind(0) }},
		{"unbind [0, 2^40]", "unbind", ErrArgument, func(x *Tensor) { Zeros(Shape{0, 1 << 40}, x.Device()).Unbind(-1) }},
		{"unflatten no sizes", "unflatten", ErrArgument, func(x *Tensor) { x.Unflatten(1) }},
		{"unflatten wrong product", "unflatten", ErrShape, func(x *Tensor) { x.Unflatten(1, 2, 2) }},
		{"unflatten two -1", "unflatten", ErrShape, func(x *Tensor) { x.Unflatten(1, -1, -1) }},
		{"unflatten overflow", "unflatten", ErrShape, func(x *Tensor) { x.Unflatten(1, math.MaxInt, 2, 0) }},
		{"unflatten dim out of range", "unflatten", ErrIndex, func(x *Tensor) { x.Unflatten(-3, 1, 2) }},
		{"repeat too few", "repeat", ErrArgument, func(x *Tensor) { x.Repeat(2) }},
		{"repeat negative", "repeat", ErrArgument, func(x *Tensor) { x.Repeat(2, -1) }},
		{"repeat overflow", "repeat", ErrShape, func(x *Tensor) { x.Repeat(math.MaxInt/2, 2) }},
		{"repeat bytes overflow", "repeat", ErrShape, func(x *Tensor) { x.Repeat(1<<60, 1) }},
		{"repeat an empty tensor past an int", "repeat", ErrShape, func(x *Tensor) { x.Narrow(1, 0, 0).Repeat(math.MaxInt, 1) }},
		{"repeat zero times beside a size past an int", "repeat", ErrShape, func(x *Tensor) { x.Repeat(math.MaxInt/2+1, 0) }},
		{"tile overflow", "tile", ErrShape, func(x *Tensor) { x.Tile(1<<40, 1<<40) }},
		{"tile an empty tensor past an int", "tile", ErrShape, func(x *Tensor) { x.Narrow(0, 0, 0).Tile(math.MaxInt) }},
		{"tile negative", "tile", ErrArgument, func(x *Tensor) { x.Tile(-1) }},
		{"masked fill non-bool mask", "masked_fill", ErrDType, func(x *Tensor) { x.MaskedFill(x, 1) }},
		{"masked fill mask that does not broadcast", "masked_fill", ErrShape, func(x *Tensor) { x.MaskedFill(Zeros(Shape{2, 2}, Bool, x.Device()), 1) }},
		{"masked fill mask broadcast too large", "masked_fill", ErrShape, func(x *Tensor) {
			x.Narrow(0, 0, 1).Narrow(1, 0, 1).MaskedFill(Zeros(Shape{1, 1}, Bool, x.Device()).Expand(1<<41, 1<<20), 1)
		}},
		{"masked fill value overflows", "masked_fill", ErrArgument, func(x *Tensor) { x.Cast(Int8).MaskedFill(x.GtScalar(1), 300) }},
		{"masked fill nil mask", "masked_fill", ErrArgument, func(x *Tensor) { x.MaskedFill(nil, 1) }},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				x := iota6(dev)
				defer x.Release()
				settle(dev)
				before := MemoryAllocated(dev)
				err := Catch(func() { Tidy(func() { tc.fn(x) }) })
				var ve *Error
				if !errors.As(err, &ve) || !errors.Is(err, tc.kind) || ve.Op != tc.op {
					t.Fatalf("error %v, want a *vram.Error of kind %v from %q", err, tc.kind, tc.op)
				}
				if after := MemoryAllocated(dev); after != before {
					t.Errorf("%d bytes allocated before, %d after", before, after)
				}
			})
		}
	}
}

// TestSplitAndRepeatGradients checks the gradients through the new view
// and copy ops against finite differences.
func TestSplitAndRepeatGradients(t *testing.T) {
	one := func(f func(x *Tensor) *Tensor) func([]*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return f(xs[0]) }
	}
	// join squares each piece and puts them back together, so that each
	// piece's gradient differs.
	join := func(ps []*Tensor, dim int) *Tensor {
		for i, p := range ps {
			ps[i] = p.Square().MulScalar(float64(i + 1))
		}
		return Cat(ps, dim)
	}
	tests := []struct {
		name string
		f    func([]*Tensor) *Tensor
		x    *Tensor
	}{
		{"chunk", one(func(x *Tensor) *Tensor { return join(x.Chunk(2, 1), 1) }), rnd(1, 2, 5)},
		{"split of a transpose", one(func(x *Tensor) *Tensor { return join(x.T().Split(2, 0), 0) }), rnd(2, 2, 5)},
		{"split sizes", one(func(x *Tensor) *Tensor { return join(x.SplitSizes([]int{1, 0, 3}, 0), 0) }), rnd(3, 4, 2)},
		{"unbind", one(func(x *Tensor) *Tensor { return join(x.Unbind(1), 0) }), rnd(4, 2, 3)},
		{"unflatten", one(func(x *Tensor) *Tensor { return x.Unflatten(-1, 2, -1).Sum(1).Exp() }), rnd(5, 3, 4)},
		{"repeat", one(func(x *Tensor) *Tensor { return x.Repeat(2, 3, 1).Square() }), rnd(6, 2, 3)},
		{"repeat of a narrow", one(func(x *Tensor) *Tensor { return x.Narrow(1, 1, 2).Repeat(2, 2).Square() }), rnd(7, 2, 3)},
		{"tile", one(func(x *Tensor) *Tensor { return x.Tile(3).Square() }), rnd(8, 2, 3)},
		{"masked fill", one(func(x *Tensor) *Tensor {
			return x.MaskedFill(FromSlice([]bool{true, false, false}, Shape{3}), 2).Square()
		}), rnd(9, 2, 3)},
		{"masked fill with a mask that grows the input", one(func(x *Tensor) *Tensor {
			return x.MaskedFill(FromSlice([]bool{true, false, false, false, true, false, false, false}, Shape{2, 2, 2}), 2).Square()
		}), rnd(10, 2, 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { gradCheck(t, tc.f, tc.x) })
	}
}

// TestMaskedFillBroadcasts checks that the result of MaskedFill has the
// broadcast shape of the input and the mask, as PyTorch's out-of-place
// masked_fill expands both, and the input's dtype.
func TestMaskedFillBroadcasts(t *testing.T) {
	tests := []struct {
		name  string
		x     func(Device) *Tensor
		mask  []bool
		shape Shape
		want  Shape
		vals  []float64
	}{
		{"mask of more dimensions", func(d Device) *Tensor { return FromSlice([]float64{1, 2}, nil, d) },
			[]bool{true, false, false, true}, Shape{2, 2}, Shape{2, 2}, []float64{9, 2, 1, 9}},
		{"input of size 1 where the mask is not", func(d Device) *Tensor { return FromSlice([]int32{4, 5}, Shape{2, 1}, d) },
			[]bool{false, true, true}, Shape{3}, Shape{2, 3}, []float64{4, 9, 9, 5, 9, 9}},
		{"both grow", func(d Device) *Tensor { return FromSlice([]float32{1, 2}, Shape{2, 1}, d) },
			[]bool{true, false}, Shape{1, 2}, Shape{2, 2}, []float64{9, 1, 9, 2}},
		{"a transposed input", func(d Device) *Tensor { return FromSlice([]float64{1, 2, 3, 4}, Shape{2, 2}, d).T() },
			[]bool{true, false}, Shape{2}, Shape{2, 2}, []float64{9, 3, 9, 4}},
		{"an empty mask dimension", func(d Device) *Tensor { return FromSlice([]float64{1}, nil, d) },
			[]bool{}, Shape{0, 1}, Shape{0, 1}, []float64{}},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				Tidy(func() {
					x := tc.x(dev)
					y := x.MaskedFill(FromSlice(tc.mask, tc.shape, dev), 9)
					if !slices.Equal(y.Shape(), tc.want) || y.DType() != x.DType() || !slices.Equal(y.Float64s(), tc.vals) {
						t.Errorf("got %v %s %v, want %v %s %v", y.Shape(), y.DType(), y.Float64s(), tc.want, x.DType(), tc.vals)
					}
				})
			})
		}
	}
}

// TestMaskedFillGraphAndDevices checks MaskedFill's graph node and that a
// mask on another device is refused unless it is a 0-d CPU tensor.
func TestMaskedFillGraphAndDevices(t *testing.T) {
	Tidy(func() {
		x := Ones(Shape{2, 2}, Sim(0), WithGrad())
		y := x.MaskedFill(FromSlice([]bool{true, false}, Shape{2}, Sim(0)), 0)
		if got := y.GradFn(); got != "masked_fill" {
			t.Errorf("GradFn() = %q, want masked_fill", got)
		}
		y.Sum().Backward()
		if got := x.Grad().Float32s(); !slices.Equal(got, []float32{0, 1, 0, 1}) {
			t.Errorf("gradient %v, want [0 1 0 1]", got)
		}
		err := Catch(func() { x.MaskedFill(FromSlice([]bool{true, false}, Shape{2}), 0) })
		if !errors.Is(err, ErrDevice) {
			t.Errorf("a CPU mask of shape [2] for a sim:0 tensor: %v, want ErrDevice", err)
		}
		if got := x.MaskedFill(Full(nil, 1, Bool), 3).Float32s(); !slices.Equal(got, []float32{3, 3, 3, 3}) {
			t.Errorf("0-d CPU mask: %v", got)
		}
	})
}

// TestMovedim pins Movedim's shapes and values against torch.movedim and
// its errors.
func TestMovedim(t *testing.T) {
	cases := []struct {
		src, dst int
		shape    Shape
		first    []float32 // the first four values of the contiguous result
	}{
		{0, 2, Shape{3, 4, 2}, []float32{0, 12, 1, 13}},
		{-1, 0, Shape{4, 2, 3}, []float32{0, 4, 8, 12}},
		{1, 1, Shape{2, 3, 4}, []float32{0, 1, 2, 3}},
		{2, -2, Shape{2, 4, 3}, []float32{0, 4, 8, 1}},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, c := range cases {
			Tidy(func() {
				x := Arange(0, 24, 1, dev).Reshape(2, 3, 4)
				m := x.Movedim(c.src, c.dst)
				if !slices.Equal(m.Shape(), c.shape) || !m.SharesStorage(x) {
					t.Errorf("%s: Movedim(%d, %d): shape %v (a view: %v), want %v", dev, c.src, c.dst, m.Shape(), m.SharesStorage(x), c.shape)
				}
				if got := m.Contiguous().Float32s()[:4]; !slices.Equal(got, c.first) {
					t.Errorf("%s: Movedim(%d, %d): values start %v, want %v", dev, c.src, c.dst, got, c.first)
				}
			})
		}
		Tidy(func() {
			if got := Scalar(2, dev).Movedim(0, -1); got.Dim() != 0 || got.Item() != 2 {
				t.Errorf("%s: Movedim of a 0-d tensor: %v", dev, got)
			}
			for _, bad := range [][2]int{{3, 0}, {0, -4}, {math.MinInt, 0}} {
				err := Catch(func() { Zeros(Shape{2, 3, 4}, dev).Movedim(bad[0], bad[1]) })
				var ve *Error
				if !errors.As(err, &ve) || !errors.Is(err, ErrIndex) || ve.Op != "movedim" {
					t.Errorf("%s: Movedim(%d, %d): %v, want ErrIndex from movedim", dev, bad[0], bad[1], err)
				}
			}
		})
	}
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Movedim(0, -1).Reshape(-1).Narrow(0, 1, 4) }, rnd(1, 2, 3))
}
