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
