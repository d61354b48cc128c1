package vram

import (
	"errors"
	"slices"
	"testing"
)

// TestEye checks torch.eye's values, shapes, dtypes and devices, the
// gradient option, and the errors, leaving no storage behind.
func TestEye(t *testing.T) {
	for _, dev := range []Device{CPU, Sim(0)} {
		settle(dev) // garbage of other tests is freed before, not during
		before := MemoryAllocated(dev)
		cases := []struct {
			name  string
			n, m  int
			opts  []Option
			dtype DType
			want  []float64
		}{
			{"square", 3, 3, nil, Float32, []float64{1, 0, 0, 0, 1, 0, 0, 0, 1}},
			{"wide", 2, 4, []Option{Int64}, Int64, []float64{1, 0, 0, 0, 0, 1, 0, 0}},
			{"tall", 3, 2, []Option{Float64}, Float64, []float64{1, 0, 0, 1, 0, 0}},
			{"bool", 2, 2, []Option{Bool}, Bool, []float64{1, 0, 0, 1}},
			{"half", 2, 2, []Option{Float16}, Float16, []float64{1, 0, 0, 1}},
			{"one", 1, 1, nil, Float32, []float64{1}},
			{"no rows", 0, 3, nil, Float32, []float64{}},
			{"no columns", 2, 0, nil, Float32, []float64{}},
		}
		for _, c := range cases {
			e := Eye(c.n, c.m, append(c.opts, dev)...)
			if !slices.Equal(e.Shape(), Shape{c.n, c.m}) || e.DType() != c.dtype || e.Device() != dev || !slices.Equal(e.Float64s(), c.want) {
				t.Errorf("%s %s: got %v %s %s %v, want [%d, %d] %s %v", dev, c.name, e.Shape(), e.DType(), e.Device(), e.Float64s(), c.n, c.m, c.dtype, c.want)
			}
			e.Release()
		}
		g := Eye(2, 2, dev, WithGrad())
		if !g.RequiresGrad() || !g.IsLeaf() {
			t.Errorf("%s: Eye WithGrad: requires grad %v, leaf %v; want a leaf that requires grad", dev, g.RequiresGrad(), g.IsLeaf())
		}
		g.Release()
		errs := []struct {
			name string
			f    func()
			kind error
		}{
			{"negative n", func() { Eye(-1, 2, dev) }, ErrArgument},
			{"negative m", func() { Eye(2, -3, dev) }, ErrArgument},
			{"integer with grad", func() { Eye(2, 2, dev, Int64, WithGrad()) }, ErrDType},
		}
		for _, e := range errs {
			if err := Catch(e.f); !errors.Is(err, e.kind) {
				t.Errorf("%s %s: got %v, want %v", dev, e.name, err, e.kind)
			}
		}
		if after := MemoryAllocated(dev); after != before {
			t.Errorf("%s: %d bytes allocated after Eye, %d before", dev, after, before)
		}
	}
}
