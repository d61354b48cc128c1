package vram

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The tests of this file follow a tensor through its life: made, moved,
// given a gradient, released, tidied, and check that every byte comes
// back.

func TestSetGradOnReleasedTensor(t *testing.T) {
	tests := []struct {
		name    string
		grad    func(w *Tensor) *Tensor // nil: SetGrad(nil)
		tidy    bool                    // make the gradient and call SetGrad inside a Tidy
		wantErr error
	}{
		{name: "fresh gradient", grad: func(w *Tensor) *Tensor { return Ones(w.Shape(), w.Device()) }, wantErr: ErrReleased},
		{name: "gradient made inside Tidy", grad: func(w *Tensor) *Tensor { return Ones(w.Shape(), w.Device()) }, tidy: true, wantErr: ErrReleased},
		{name: "no gradient", grad: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := quiet
			settle(d)
			base := countsOf(d)
			w := Ones(Shape{64}, d, WithGrad())
			w.Release()
			var g *Tensor
			var err error
			run := func() {
				if tc.grad != nil {
					g = tc.grad(w)
				}
				err = Catch(func() { w.SetGrad(g) })
			}
			if tc.tidy {
				Tidy(run)
			} else {
				run()
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("SetGrad on a released tensor: %v, want %v", err, tc.wantErr)
			}
			if g != nil {
				if g.Released() != tc.tidy {
					t.Errorf("gradient released: %v, want %v (it stays the caller's)", g.Released(), tc.tidy)
				}
				g.Release()
			}
			if w.Grad() != nil {
				t.Errorf("a released tensor holds a gradient")
			}
			checkBalanced(t, d, base, false)
		})
	}
}

func TestSetGradRacesRelease(t *testing.T) {
	// Whichever comes first, the gradient is released exactly once: by
	// the tensor's Release when SetGrad won, by its caller when SetGrad
	// failed with ErrReleased.
	for _, d := range raceDevices(t) {
		t.Run(d.String(), func(t *testing.T) {
			settle(d)
			base := countsOf(d)
			for range 200 {
				w := Ones(Shape{16}, d, WithGrad())
				g := Ones(Shape{16}, d)
				var wg sync.WaitGroup
				wg.Go(w.Release)
				if err := Catch(func() { w.SetGrad(g) }); err != nil {
					if !errors.Is(err, ErrReleased) {
						t.Fatalf("SetGrad: %v", err)
					}
					g.Release()
				}
				wg.Wait()
			}
			checkBalanced(t, d, base, false)
		})
	}
}

func TestLeakReportAfterInPlaceChanges(t *testing.T) {
	// A tensor changed in place and then forgotten is reported as what it
	// is when the garbage collector finds it.
	d := needSim(t, 2)
	tests := []struct {
		name   string
		change func(x *Tensor)
		want   string
	}{
		{"cast to float16", func(x *Tensor) { x.CastInPlace(Float16) }, "a tensor [8] float16 on " + d.String()},
		{"cast to bfloat16", func(x *Tensor) { x.CastInPlace(BFloat16) }, "a tensor [8] bfloat16 on " + d.String()},
		{"moved", func(x *Tensor) { x.MoveTo(CPU) }, "a tensor [8] float64 on cpu"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws := collectWarnings(t, func() { forgetChanged(d, tc.change) }, tc.want)
			found := false
			for _, w := range ws {
				found = found || strings.HasPrefix(w.Message, tc.want)
			}
			if !found {
				t.Errorf("no report begins with %q; got %d: %v", tc.want, len(ws), ws)
			}
		})
	}
}

// forgetChanged makes a float64 tensor on d, changes it and drops it
// without releasing it.
//
//go:noinline
func forgetChanged(d Device, change func(*Tensor)) {
	x := Ones(Shape{8}, d, Float64)
	change(x)
}

func TestNewTensorOfANumber(t *testing.T) {
	d := quiet
	x := Ones(Shape{2}, d, Float64)
	defer x.Release()
	tests := []struct {
		name    string
		data    any
		shape   Shape
		opts    []Option
		want    float64
		dtype   DType
		wantDim Shape
		wantErr error
	}{
		{name: "float64", data: 2.5, want: 2.5, dtype: Float64, wantDim: Shape{}},
		{name: "float32", data: float32(-1.5), want: -1.5, dtype: Float64, wantDim: Shape{}},
		{name: "int", data: 7, want: 7, dtype: Float64, wantDim: Shape{}},
		{name: "int64", data: int64(-3), want: -3, dtype: Float64, wantDim: Shape{}},
		{name: "int32", data: int32(4), want: 4, dtype: Float64, wantDim: Shape{}},
		{name: "bool", data: true, want: 1, dtype: Float64, wantDim: Shape{}},
		{name: "dtype option", data: 3, opts: []Option{Int32}, want: 3, dtype: Int32, wantDim: Shape{}},
		{name: "one-element shape", data: 5.0, shape: Shape{1, 1}, want: 5, dtype: Float64, wantDim: Shape{1, 1}},
		{name: "shape of two", data: 5.0, shape: Shape{2}, wantErr: ErrShape},
		{name: "overflowing int8", data: 300, opts: []Option{Int8}, wantErr: ErrArgument},
		{name: "unsupported type", data: uint8(1), wantErr: ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			settle(d)
			base := countsOf(d)
			var n *Tensor
			err := Catch(func() { n = x.NewTensor(tc.data, tc.shape, tc.opts...) })
			if tc.wantErr != nil {
				var ve *Error
				if !errors.Is(err, tc.wantErr) || !errors.As(err, &ve) || ve.Op != "new_tensor" {
					t.Fatalf("NewTensor(%v): %v, want %v from new_tensor", tc.data, err, tc.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("NewTensor(%v): %v", tc.data, err)
				}
				if got := n.Item(); got != tc.want || n.DType() != tc.dtype || n.Device() != d || !slices.Equal(n.Shape(), tc.wantDim) {
					t.Errorf("NewTensor(%v) = %v %v %v shape %v, want %v %v %v shape %v",
						tc.data, got, n.DType(), n.Device(), n.Shape(), tc.want, tc.dtype, d, tc.wantDim)
				}
				n.Release()
			}
			checkBalanced(t, d, base, false)
		})
	}
}

func TestOpsLeaveNothingToTheCollector(t *testing.T) {
	// Each op releases its own temporaries and, when it fails, its
	// result: nothing is left for the garbage collector to count as leaked.
	d := quiet
	tests := []struct {
		name    string
		op      func(x, index *Tensor) *Tensor // index is out of range when wantErr is set
		wantErr error
	}{
		{"ScatterValue", func(x, good *Tensor) *Tensor { return x.ScatterValue(0, good, 2) }, nil},
		{"ArgMaxAll", func(x, _ *Tensor) *Tensor { return x.ArgMaxAll() }, nil},
		{"ArgMinAll", func(x, _ *Tensor) *Tensor { return x.ArgMinAll() }, nil},
		{"Scatter with a bad index", func(x, bad *Tensor) *Tensor { return x.Scatter(0, bad, x) }, ErrIndex},
		{"ScatterAdd with a bad index", func(x, bad *Tensor) *Tensor { return x.ScatterAdd(0, bad, x) }, ErrIndex},
		{"ScatterValue with a bad index", func(x, bad *Tensor) *Tensor { return x.ScatterValue(0, bad, 1) }, ErrIndex},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			settle(d)
			base := countsOf(d)
			x := FromSlice([]float32{0, 1, 2, 3, 4, 5}, Shape{2, 3}, d)
			first := int64(1)
			if tc.wantErr != nil {
				first = 9
			}
			bad := FromSlice([]int64{first, 0, 1}, Shape{1, 3}, d)
			var out *Tensor
			err := Catch(func() { out = tc.op(x, bad) })
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if out != nil {
				out.Release()
			}
			x.Release()
			bad.Release()
			settle(d)
			checkBalanced(t, d, base, false)
		})
	}
}
