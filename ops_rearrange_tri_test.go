package vram

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"testing"
)

func TestTriuTril(t *testing.T) {
	x := Arange(1, 13, 1, Float64).Reshape(3, 4)
	tests := []struct {
		name string
		got  *Tensor
		want []float64
	}{
		{"triu 0", x.Triu(0), []float64{1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}},
		{"triu 1", x.Triu(1), []float64{0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}},
		{"triu -1", x.Triu(-1), []float64{1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12}},
		{"tril 0", x.Tril(0), []float64{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}},
		{"tril -1", x.Tril(-1), []float64{0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}},
		{"tril 5", x.Tril(5), x.Float64s()},
		{"batched tril", Ones(Shape{2, 2, 2}, Float64).Tril(0), []float64{1, 0, 1, 1, 1, 0, 1, 1}},
		{"bool tril", Ones(Shape{2, 3}, Bool).Tril(0).Cast(Float64), []float64{1, 0, 0, 1, 1, 0}},
		{"tril min int", x.Tril(math.MinInt), make([]float64, 12)},
		{"tril max int", x.Tril(math.MaxInt), x.Float64s()},
		{"triu min int", x.Triu(math.MinInt), x.Float64s()},
		{"triu max int", x.Triu(math.MaxInt), make([]float64, 12)},
		{"tril -2 of 3", x.Tril(-2), []float64{0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0}},
		{"tril -3 of 3", x.Tril(-3), make([]float64, 12)},
		{"triu 3 of 4", x.Triu(3), []float64{0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"triu 4 of 4", x.Triu(4), make([]float64, 12)},
		{"tril transposed", x.T().Tril(0), []float64{1, 0, 0, 2, 6, 0, 3, 7, 11, 4, 8, 12}},
		{"tril int32 wide", Arange(1, 7, 1, Int32).Reshape(1, 6).Tril(2).Cast(Float64), []float64{1, 2, 3, 0, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.got.Float64s(); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Triu(1) }, rnd(1, 2, 3, 3))
	if err := Catch(func() { Arange(0, 3, 1).Tril(0) }); !errors.Is(err, ErrShape) {
		t.Errorf("1-D input: %v", err)
	}
}

// TestTriuTrilLargeViews checks that Tril and Triu of an expanded view
// with sides past what the host writes positions for fail with ErrShape
// on every device, before anything is allocated: a mask of rows×cols host
// entries panicked in the runtime there.
func TestTriuTrilLargeViews(t *testing.T) {
	const side = 1 << 30
	tests := []struct {
		name  string
		shape Shape
	}{
		{"square", Shape{side, side}},
		{"tall", Shape{side, 1}},
		{"wide batch", Shape{2, 1, side}},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, tc := range tests {
			for _, f := range []func(*Tensor) *Tensor{
				func(x *Tensor) *Tensor { return x.Tril(0) },
				func(x *Tensor) *Tensor { return x.Triu(-1) },
			} {
				t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
					one := Ones(slices.Repeat(Shape{1}, len(tc.shape)), dev)
					defer one.Release()
					x := one.Expand(tc.shape...)
					defer x.Release()
					if err := Catch(func() { f(x) }); !errors.Is(err, ErrShape) {
						t.Fatalf("got %v, want ErrShape", err)
					}
				})
			}
		}
	}
}

// TestFlipRollKeepChannelsLast checks that Flip and Roll of a
// channels-last tensor are channels-last, as PyTorch's flip (an empty_like
// that preserves the format) and roll (a cat of channels-last slices)
// are, with the values of the row-major result, and that Roll with no
// dims, which flattens, is row-major as PyTorch's is.
func TestFlipRollKeepChannelsLast(t *testing.T) {
	tests := []struct {
		name string
		f    func(*Tensor) *Tensor
		want MemoryFormat
	}{
		{"flip channels", func(x *Tensor) *Tensor { return x.Flip(1) }, ChannelsLast},
		{"flip all", func(x *Tensor) *Tensor { return x.Flip(0, 1, 2, 3) }, ChannelsLast},
		{"flip none", func(x *Tensor) *Tensor { return x.Flip() }, ChannelsLast},
		{"roll width", func(x *Tensor) *Tensor { return x.Roll([]int{1}, []int{-1}) }, ChannelsLast},
		{"roll two dims", func(x *Tensor) *Tensor { return x.Roll([]int{1, -1}, []int{1, 2}) }, ChannelsLast},
		{"roll flattened", func(x *Tensor) *Tensor { return x.Roll([]int{2}, nil) }, ContiguousFormat},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				Tidy(func() {
					x := Arange(0, 24, 1, Float64, dev).Reshape(1, 3, 2, 4)
					y := tc.f(x.Contiguous(ChannelsLast))
					if got := y.SuggestMemoryFormat(); got != tc.want || !y.IsContiguous(tc.want) {
						t.Errorf("format %v, want %v", got, tc.want)
					}
					if got, want := y.Float64s(), tc.f(x).Float64s(); !slices.Equal(got, want) {
						t.Errorf("values %v, want %v", got, want)
					}
				})
			})
		}
	}
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Contiguous(ChannelsLast).Flip(1, 3).Roll([]int{1}, []int{2}) }, rnd(5, 1, 2, 2, 3))
}

// TestFlipLargeViews checks that Flip of an expanded view with a flipped
// side past what the host writes positions for fails with ErrShape on
// every device, before anything is allocated, as Tril and Triu do, while
// a huge side that is not flipped is no concern of the limit.
func TestFlipLargeViews(t *testing.T) {
	const side = 1 << 30
	tests := []struct {
		name  string
		shape Shape
		dims  []int
	}{
		{"vector", Shape{side}, []int{0}},
		{"last of two", Shape{2, side}, []int{-1}},
		{"huge one among others", Shape{3, side, 2}, []int{0, 1, 2}},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				one := Ones(slices.Repeat(Shape{1}, len(tc.shape)), dev)
				defer one.Release()
				x := one.Expand(tc.shape...)
				defer x.Release()
				before := MemoryAllocated(dev)
				err := Catch(func() { x.Flip(tc.dims...) })
				var ve *Error
				if !errors.As(err, &ve) || !errors.Is(err, ErrShape) || ve.Op != "flip" {
					t.Fatalf("got %v, want an error of kind ErrShape naming flip", err)
				}
				if after := MemoryAllocated(dev); after != before {
					t.Errorf("%d bytes allocated by the refused flip", after-before)
				}
			})
		}
	}
}

// TestRollMakesNoHostTable checks that Roll writes no host table as long
// as the rolled side: on a shape-only device, where a side of any size
// costs the host nothing, rolling one of 2^24 entries allocates far less
// than a byte an entry on the host.
func TestRollMakesNoHostTable(t *testing.T) {
	d := planningDevice(t)
	const n = 1 << 24
	tests := []struct {
		name   string
		shape  Shape
		shifts []int
		dims   []int
	}{
		{"vector", Shape{n}, []int{3}, []int{0}},
		{"negative shift", Shape{2, n}, []int{-5}, []int{1}},
		{"two dims", Shape{n, 2}, []int{n + 1, 1}, []int{0, 1}},
		{"flattened", Shape{2, n / 2}, []int{7}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := Zeros(tc.shape, Int8, d)
			defer x.Release()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			y := x.Roll(tc.shifts, tc.dims)
			runtime.ReadMemStats(&after)
			defer y.Release()
			if !slices.Equal(y.Shape(), tc.shape) {
				t.Errorf("shape %v, want %v", y.Shape(), tc.shape)
			}
			if host := after.TotalAlloc - before.TotalAlloc; host >= n {
				t.Errorf("%d bytes allocated on the host for a side of %d", host, n)
			}
		})
	}
}

// TestRollHugeSide rolls a side of 2^31 entries on a shape-only sim
// device of a capacity that holds it, which costs the host nothing.
func TestRollHugeSide(t *testing.T) {
	if !inChild(t, EnvSimDevices+"=64GiB", EnvSimShapeOnly+"=1") {
		return
	}
	const n = 1 << 31
	x := Zeros(Shape{2, n}, Int8, Sim(0))
	defer x.Release()
	for _, shifts := range [][]int{{1, 5}, {0, -n + 1}} {
		y := x.Roll(shifts, []int{0, 1})
		if !slices.Equal(y.Shape(), Shape{2, n}) {
			t.Errorf("Roll(%v): shape %v, want %v", shifts, y.Shape(), Shape{2, n})
		}
		y.Release()
	}
}
