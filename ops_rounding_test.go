package vram

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestRoundingBoolAndInt checks that Floor, Ceil, Round and Trunc refuse a
// bool tensor with ErrDType naming the op, as torch.floor and its siblings
// raise, and copy an integer tensor unchanged in its dtype.
func TestRoundingBoolAndInt(t *testing.T) {
	ops := []struct {
		name string
		fn   func(*Tensor) *Tensor
	}{
		{"floor", (*Tensor).Floor},
		{"ceil", (*Tensor).Ceil},
		{"round", (*Tensor).Round},
		{"trunc", (*Tensor).Trunc},
	}
	for _, d := range []Device{CPU, Sim(0)} {
		for _, o := range ops {
			t.Run(d.String()+"/"+o.name+"/bool", func(t *testing.T) {
				b := FromSlice([]bool{true, false}, Shape{2}, d)
				defer b.Release()
				err := Catch(func() { Tidy(func() { o.fn(b) }) })
				if !errors.Is(err, ErrDType) || !strings.Contains(err.Error(), o.name) {
					t.Errorf("got %v, want an ErrDType naming %s", err, o.name)
				}
				if got := b.Int64s(); !slices.Equal(got, []int64{1, 0}) {
					t.Errorf("input changed to %v", got)
				}
			})
			t.Run(d.String()+"/"+o.name+"/int32", func(t *testing.T) {
				x := FromSlice([]int32{-3, 0, 7}, Shape{3}, d)
				defer x.Release()
				y := o.fn(x)
				defer y.Release()
				if y.DType() != Int32 || !slices.Equal(y.Int64s(), []int64{-3, 0, 7}) {
					t.Errorf("got %v %v, want int32 [-3 0 7]", y.DType(), y.Int64s())
				}
			})
		}
	}
}
