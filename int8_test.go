package vram_test

import (
	"slices"
	"testing"

	"github.com/vramgo/vram"
)

// TestInt8 covers the int8 dtype through the public API on the CPU and a
// sim device: casts from floats (truncating, NaN to 0, wrapping out of
// range), casts back, arithmetic that wraps, reductions and parsing.
func TestInt8(t *testing.T) {
	devs := []vram.Device{vram.CPU}
	if vram.Sim(0).Available() {
		devs = append(devs, vram.Sim(0))
	}
	for _, d := range devs {
		t.Run(d.String(), func(t *testing.T) {
			x := vram.FromSlice([]float32{1.9, -1.9, 127, -128, 130, -300, 0}, vram.Shape{7}, d)
			defer x.Release()
			q := x.Cast(vram.Int8)
			defer q.Release()
			if q.DType() != vram.Int8 || q.Bytes() != 7 {
				t.Fatalf("cast: dtype %s, %d bytes; want int8, 7 bytes", q.DType(), q.Bytes())
			}
			want := []int64{1, -1, 127, -128, -126, -44, 0}
			if got := q.Int64s(); !slices.Equal(got, want) {
				t.Errorf("cast to int8 = %v, want %v", got, want)
			}
			back := q.Cast(vram.Float32)
			defer back.Release()
			if got := back.Float32s(); !slices.Equal(got, []float32{1, -1, 127, -128, -126, -44, 0}) {
				t.Errorf("cast back = %v", got)
			}
			s := q.Add(q)
			defer s.Release()
			if got := s.Int64s(); !slices.Equal(got, []int64{2, -2, -2, 0, 4, -88, 0}) {
				t.Errorf("q+q = %v, want wrapped sums", got)
			}
			f := vram.Full(vram.Shape{3}, -5.5, vram.Int8, d)
			defer f.Release()
			if got := f.Int64s(); !slices.Equal(got, []int64{-5, -5, -5}) {
				t.Errorf("Full(-5.5) = %v", got)
			}
			m := q.Max()
			defer m.Release()
			if got := m.Int64s(); !slices.Equal(got, []int64{127}) {
				t.Errorf("max = %v", got)
			}
		})
	}
	for _, s := range []string{"int8", "char"} {
		if dt, err := vram.ParseDType(s); err != nil || dt != vram.Int8 {
			t.Errorf("ParseDType(%q) = %v, %v", s, dt, err)
		}
	}
	if vram.Int8.Size() != 1 || vram.Int8.IsFloat() || vram.Int8.String() != "int8" {
		t.Errorf("int8: size %d, float %v, name %q", vram.Int8.Size(), vram.Int8.IsFloat(), vram.Int8)
	}
}
