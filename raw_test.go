package vram

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram/backend"
)

func TestRawBytesRoundTrip(t *testing.T) {
	for _, d := range []Device{CPU, Sim(0)} {
		x := Arange(0, 6, 1, d).Reshape(2, 3)
		b := x.RawBytes()
		y := Zeros(Shape{2, 3}, d)
		y.SetRawBytes(b)
		if got := y.Sum().Item(); got != 15 {
			t.Errorf("%v: sum after SetRawBytes = %v", d, got)
		}
		// Non-contiguous source reads in row-major order.
		tb := x.T().RawBytes()
		z := Zeros(Shape{3, 2}, d)
		z.SetRawBytes(tb)
		if got := z.Float32s(); got[1] != 3 {
			t.Errorf("%v: transposed bytes %v", d, got)
		}
		if err := Catch(func() { y.SetRawBytes(b[:4]) }); !errors.Is(err, ErrArgument) {
			t.Errorf("short bytes: %v", err)
		}
		if err := Catch(func() { x.T().SetRawBytes(b) }); !errors.Is(err, ErrArgument) {
			t.Errorf("non-contiguous destination: %v", err)
		}
		for _, r := range []*Tensor{x, y, z} {
			r.Release()
		}
	}
}

func TestRaw(t *testing.T) {
	s := mustNewStream(t, Sim(0))
	x := Ones(Shape{4}, Sim(0))
	defer x.Release()
	WithStream(s, func() {
		err := Raw(x, func(r RawTensor) error {
			if r.Stream != s.bs || r.View.NumElements() != 4 {
				t.Errorf("raw view %v on stream %v", r.View.Shape, r.Stream)
			}
			return r.Device.Fill(r.Stream, r.View, 7)
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	s.Synchronize()
	if got := x.Sum().Item(); got != 28 {
		t.Errorf("sum after a raw fill = %v", got)
	}
	wantErr := errors.New("boom")
	if err := Raw(x, func(RawTensor) error { return wantErr }); !errors.Is(err, wantErr) {
		t.Errorf("Raw error %v", err)
	}
	_ = backend.Float32
}

// TestRandBelowOne: uniform draws never round up to 1 in a narrow dtype.
func TestRandBelowOne(t *testing.T) {
	for _, dt := range []DType{Float32, Float16, BFloat16} {
		x := Rand(Shape{1 << 16}, dt, WithGenerator(NewGenerator(3)))
		if m := x.Max().Item(); m >= 1 {
			t.Errorf("%s: max of rand = %v, want below 1", dt, m)
		}
		x.Release()
	}
}

// TestSetRawBytesIntoView checks that SetRawBytes on a contiguous view
// writes the view's own elements, wherever it starts in its base.
func TestSetRawBytesIntoView(t *testing.T) {
	tests := []struct {
		name string
		view func(b *Tensor) *Tensor
		want []float32
	}{
		{"narrow at the start", func(b *Tensor) *Tensor { return b.Narrow(0, 0, 2) }, []float32{1, 2, 0, 0, 0, 0}},
		{"narrow in the middle", func(b *Tensor) *Tensor { return b.Narrow(0, 2, 2) }, []float32{0, 0, 1, 2, 0, 0}},
		{"narrow at the end", func(b *Tensor) *Tensor { return b.Narrow(0, 4, 2) }, []float32{0, 0, 0, 0, 1, 2}},
		{"select of a row", func(b *Tensor) *Tensor { return b.Reshape(3, 2).Select(0, 1) }, []float32{0, 0, 1, 2, 0, 0}},
	}
	src := FromSlice([]float32{1, 2}, nil)
	defer src.Release()
	raw := src.RawBytes()
	for _, d := range []Device{CPU, Sim(0)} {
		for _, tt := range tests {
			b := Zeros(Shape{6}, d)
			v := tt.view(b)
			v.SetRawBytes(raw)
			if got := b.Float32s(); !slices.Equal(got, tt.want) {
				t.Errorf("%v, %s: base holds %v, want %v", d, tt.name, got, tt.want)
			}
			if got := v.Float32s(); !slices.Equal(got, []float32{1, 2}) {
				t.Errorf("%v, %s: view holds %v, want [1 2]", d, tt.name, got)
			}
			v.Release()
			b.Release()
		}
	}
}

// TestRawWritesAndVersions: Raw alone leaves t's version (a read through it
// must not spoil a graph), IncrementVersion counts a write made through it
// so that a graph that saved t, or a view of it, refuses to backpropagate,
// and every view and Detach of t shares the count, as in PyTorch.
func TestRawWritesAndVersions(t *testing.T) {
	tests := []struct {
		name      string
		write     func(x *Tensor) // x is the tensor the graph saved
		bumps     bool
		wantError bool
	}{
		{"raw read", func(x *Tensor) {
			_ = Raw(x, func(r RawTensor) error { return nil })
		}, false, false},
		{"raw write counted", func(x *Tensor) {
			_ = Raw(x, func(r RawTensor) error { return r.Device.Fill(r.Stream, r.View, 7) })
			x.IncrementVersion()
		}, true, true},
		{"write through a detached view", func(x *Tensor) {
			d := x.Detach()
			defer d.Release()
			_ = Raw(d, func(r RawTensor) error { return r.Device.Fill(r.Stream, r.View, 7) })
			d.IncrementVersion()
		}, true, true},
		{"in-place op on a view", func(x *Tensor) {
			v := x.Reshape(2, 2)
			defer v.Release()
			v.FillInPlace(3)
		}, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := Ones(Shape{4}, Sim(0), WithGrad())
				x := Arange(0, 4, 1, Sim(0))
				loss := w.Mul(x).Sum() // saves x
				before := x.Version()
				tc.write(x)
				if got := x.Version(); (got != before) != tc.bumps {
					t.Fatalf("version %d → %d, want a change: %v", before, got, tc.bumps)
				}
				err := Catch(func() { loss.Backward() })
				if tc.wantError != errors.Is(err, ErrAutograd) {
					t.Fatalf("Backward: %v, want ErrAutograd: %v", err, tc.wantError)
				}
				if !tc.wantError {
					if g := w.Grad().Float32s(); g[3] != 3 {
						t.Errorf("gradient %v, want x", g)
					}
				}
			})
		})
	}
	x := Ones(Shape{2})
	x.Release()
	for name, f := range map[string]func(){"Version": func() { x.Version() }, "IncrementVersion": x.IncrementVersion} {
		if err := Catch(f); !errors.Is(err, ErrReleased) {
			t.Errorf("%s of a released tensor: %v, want ErrReleased", name, err)
		}
	}
}
