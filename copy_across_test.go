package vram

import (
	"errors"
	"slices"
	"testing"
)

// TestCopyFromAcrossDevices: copy_ takes a source on another device,
// converting its dtype and broadcasting it, as PyTorch's does, and leaves
// no copy behind on either device.
func TestCopyFromAcrossDevices(t *testing.T) {
	tests := []struct {
		name     string
		dst      func() (dst, base *Tensor) // the tensor written; base: the tensor it views, or nil
		src      func() *Tensor
		want     []float64 // dst's values afterwards
		wantBase []float64 // when dst is a view: its base's values afterwards
	}{
		{"sim:1 to cpu",
			func() (*Tensor, *Tensor) { return Zeros(Shape{2, 2}), nil },
			func() *Tensor { return FromSlice([]float32{1, 2, 3, 4}, Shape{2, 2}, Sim(1)) },
			[]float64{1, 2, 3, 4}, nil},
		{"cpu float64 to sim:0 float32",
			func() (*Tensor, *Tensor) { return Zeros(Shape{3}, Sim(0)), nil },
			func() *Tensor { return FromSlice([]float64{0.5, -1.25, 3}, nil) },
			[]float64{0.5, -1.25, 3}, nil},
		{"sim:1 to sim:0, broadcast",
			func() (*Tensor, *Tensor) { return Zeros(Shape{2, 3}, Sim(0)), nil },
			func() *Tensor { return FromSlice([]float32{1, 2, 3}, nil, Sim(1)) },
			[]float64{1, 2, 3, 1, 2, 3}, nil},
		{"cpu int64 to sim:1 float32",
			func() (*Tensor, *Tensor) { return Zeros(Shape{2}, Sim(1)), nil },
			func() *Tensor { return FromSlice([]int64{7, -8}, nil) },
			[]float64{7, -8}, nil},
		{"sim:0 float32 to cpu int32, toward zero",
			func() (*Tensor, *Tensor) { return Zeros(Shape{2}, Int32), nil },
			func() *Tensor { return FromSlice([]float32{2.7, -2.7}, nil, Sim(0)) },
			[]float64{2, -2}, nil},
		{"transposed source",
			func() (*Tensor, *Tensor) { return Zeros(Shape{2, 2}, Sim(0)), nil },
			func() *Tensor {
				x := FromSlice([]float32{1, 2, 3, 4}, Shape{2, 2}, Sim(1))
				defer x.Release()
				return x.T()
			},
			[]float64{1, 3, 2, 4}, nil},
		{"into a view",
			func() (*Tensor, *Tensor) {
				b := Zeros(Shape{2, 3}, Sim(0))
				return b.Narrow(1, 1, 2), b
			},
			func() *Tensor { return FromSlice([]float32{5, 6}, nil) },
			[]float64{5, 6, 5, 6}, []float64{0, 5, 6, 0, 5, 6}},
		{"0-d source on a device",
			func() (*Tensor, *Tensor) { return Zeros(Shape{3}), nil },
			func() *Tensor { return Scalar(9, Sim(1)) },
			[]float64{9, 9, 9}, nil},
		{"into a 0-d CPU tensor",
			func() (*Tensor, *Tensor) { return Zeros(Shape{}), nil },
			func() *Tensor { return Scalar(2, Sim(0)) },
			[]float64{2}, nil},
		{"empty",
			func() (*Tensor, *Tensor) { return Zeros(Shape{0, 2}, Sim(0)), nil },
			func() *Tensor { return Zeros(Shape{2}, Sim(1)) },
			[]float64{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			settle(CPU, Sim(0), Sim(1)) // earlier tests' garbage is freed before, not during, the count
			before := map[Device]int64{CPU: liveOn(CPU), Sim(0): liveOn(Sim(0)), Sim(1): liveOn(Sim(1))}
			dst, whole := tt.dst()
			src := tt.src()
			srcBefore := src.Float64s()
			version := dst.ref.st.version.Load()
			if got := dst.CopyFrom(src); got != dst {
				t.Errorf("CopyFrom returned another tensor")
			}
			if got := dst.Float64s(); !slices.Equal(got, tt.want) {
				t.Errorf("dst holds %v, want %v", got, tt.want)
			}
			if whole != nil {
				if got := whole.Float64s(); !slices.Equal(got, tt.wantBase) {
					t.Errorf("the view's base holds %v, want %v", got, tt.wantBase)
				}
				whole.Release()
			}
			if got := src.Float64s(); !slices.Equal(got, srcBefore) {
				t.Errorf("src changed from %v to %v", srcBefore, got)
			}
			if dst.ref.st.version.Load() == version {
				t.Errorf("the write was not counted (version %d)", version)
			}
			dst.Release()
			src.Release()
			for d, n := range before {
				if got := liveOn(d); got != n {
					t.Errorf("%s holds %d live bytes, %d before", d, got, n)
				}
			}
		})
	}
}

// TestCopyFromAcrossDevicesRefuses: what CopyFrom refuses on one device it
// refuses across devices too, with the same error, before moving anything:
// dst keeps its values and no device keeps a copy.
func TestCopyFromAcrossDevicesRefuses(t *testing.T) {
	var viewBase *Tensor // the tensor that a dst is a view of
	defer func() { viewBase.Release() }()
	tests := []struct {
		name string
		dst  func() *Tensor
		src  func() *Tensor
		want error
	}{
		{"shape that does not broadcast",
			func() *Tensor { return Ones(Shape{2, 3}, Sim(0)) },
			func() *Tensor { return Zeros(Shape{2}, Sim(1)) }, ErrShape},
		{"more dimensions than dst",
			func() *Tensor { return Ones(Shape{3}) },
			func() *Tensor { return Zeros(Shape{1, 3}, Sim(1)) }, ErrShape},
		{"src requires grad, dst is a view",
			func() *Tensor { viewBase = Ones(Shape{2}, Sim(0)); return viewBase.Narrow(0, 0, 2) },
			func() *Tensor { return Zeros(Shape{2}, WithGrad()) }, ErrAutograd},
		{"dst requires grad",
			func() *Tensor { return Ones(Shape{2}, Sim(0), WithGrad()) },
			func() *Tensor { return Zeros(Shape{2}) }, ErrAutograd},
		{"released src",
			func() *Tensor { return Ones(Shape{2}, Sim(0)) },
			func() *Tensor { z := Zeros(Shape{2}, Sim(1)); z.Release(); return z }, ErrReleased},
		{"expanded dst",
			func() *Tensor { return Ones(Shape{1}, Sim(0)).Expand(3) },
			func() *Tensor { return Zeros(Shape{3}) }, ErrArgument},
		{"nil src",
			func() *Tensor { return Ones(Shape{2}, Sim(0)) },
			func() *Tensor { return nil }, ErrArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst, src := tt.dst(), tt.src()
			settle(CPU, Sim(0), Sim(1)) // earlier tests' garbage is freed before, not during, the count
			before := map[Device]int64{CPU: liveOn(CPU), Sim(0): liveOn(Sim(0)), Sim(1): liveOn(Sim(1))}
			err := Catch(func() { dst.CopyFrom(src) })
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want an error wrapping %v", err, tt.want)
			}
			for d, n := range before {
				if got := liveOn(d); got != n {
					t.Errorf("%s holds %d live bytes after the refusal, %d before", d, got, n)
				}
			}
			for i, v := range dst.Float64s() {
				if v != 1 {
					t.Errorf("dst[%d] = %v after the refusal, want 1", i, v)
				}
			}
			dst.Release()
			src.Release()
		})
	}

	// Under NoGrad a src that requires grad is copied, as on one device.
	dst := Zeros(Shape{2}, Sim(0))
	defer dst.Release()
	src := FromSlice([]float32{3, 4}, nil, WithGrad())
	defer src.Release()
	NoGrad(func() { dst.CopyFrom(src) })
	if got := dst.Float64s(); !slices.Equal(got, []float64{3, 4}) {
		t.Errorf("under NoGrad: dst holds %v, want [3 4]", got)
	}
}
