package vram_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram"
)

// TestIntegerValueOverflow: a value is stored in an integer dtype, then
// truncated toward zero, only when it lies within the dtype's range, as
// PyTorch's checked conversion of a number (c10::overflows) requires, so
// that Full(127.5, int8) is refused with ErrArgument as torch.full's
// "value cannot be converted to type int8_t without overflow" is, rather
// than truncated to 127; a fraction inside the range is truncated.
func TestIntegerValueOverflow(t *testing.T) {
	fills := []struct {
		name string
		fill func(v float64, dt vram.DType) []int64
	}{
		{"Full", func(v float64, dt vram.DType) []int64 { return vram.Full(vram.Shape{1}, v, dt).Int64s() }},
		{"FullLike", func(v float64, dt vram.DType) []int64 {
			return vram.FullLike(vram.Zeros(vram.Shape{1}, dt), v).Int64s()
		}},
		{"FillInPlace", func(v float64, dt vram.DType) []int64 {
			return vram.Zeros(vram.Shape{1}, dt).FillInPlace(v).Int64s()
		}},
		{"FromSlice", func(v float64, dt vram.DType) []int64 {
			return vram.FromSlice([]float64{v}, vram.Shape{1}, dt).Int64s()
		}},
	}
	tests := []struct {
		v    float64
		dt   vram.DType
		want int64 // or an error, when ok is false
		ok   bool
	}{
		{127, vram.Int8, 127, true},
		{126.9, vram.Int8, 126, true},
		{-128, vram.Int8, -128, true},
		{-127.9, vram.Int8, -127, true},
		{-0.9, vram.Int8, 0, true},
		{127.5, vram.Int8, 0, false},
		{127.01, vram.Int8, 0, false},
		{-128.5, vram.Int8, 0, false},
		{math.MaxInt32, vram.Int32, math.MaxInt32, true},
		{math.MaxInt32 + 0.5, vram.Int32, 0, false},
		{math.MinInt32 - 0.5, vram.Int32, 0, false},
	}
	for _, f := range fills {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%v %s", f.name, tt.v, tt.dt), func(t *testing.T) {
				var got []int64
				err := vram.Catch(func() { vram.Tidy(func() { got = f.fill(tt.v, tt.dt) }) })
				if !tt.ok {
					if !errors.Is(err, vram.ErrArgument) {
						t.Fatalf("got %v, %v; want an error matching vram.ErrArgument", got, err)
					}
					return
				}
				if err != nil || len(got) != 1 || got[0] != tt.want {
					t.Fatalf("got %v, %v; want [%d]", got, err, tt.want)
				}
			})
		}
	}
}
