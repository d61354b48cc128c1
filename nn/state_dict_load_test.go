package nn_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

func TestLoadStateDict(t *testing.T) {
	f64 := func(shape vram.Shape, vals ...float64) *vram.Tensor {
		return vram.FromSlice(vals, shape, vram.CPU, vram.Float64)
	}
	full := func() map[string]*vram.Tensor {
		return map[string]*vram.Tensor{
			"0.weight":              f64(vram.Shape{2, 2}, 1, 2, 3, 4),
			"0.bias":                f64(vram.Shape{2}, 5, 6),
			"1.weight":              f64(vram.Shape{2}, 7, 8),
			"1.bias":                f64(vram.Shape{2}, 9, 10),
			"1.running_mean":        f64(vram.Shape{2}, 11, 12),
			"1.running_var":         f64(vram.Shape{2}, 13, 14),
			"1.num_batches_tracked": vram.FromSlice([]int64{15}, vram.Shape{}, vram.CPU, vram.Int64),
		}
	}
	tests := []struct {
		name       string
		edit       func(map[string]*vram.Tensor)
		strict     bool
		kind       error
		missing    []string
		unexpected []string
		loaded     bool
	}{
		{name: "strict", strict: true, loaded: true},
		{name: "strict missing", edit: func(m map[string]*vram.Tensor) { delete(m, "0.bias") }, strict: true, kind: vram.ErrArgument, missing: []string{"0.bias"}},
		{name: "strict unexpected", edit: func(m map[string]*vram.Tensor) { m["2.weight"] = f64(vram.Shape{1}, 0) }, strict: true, kind: vram.ErrArgument, unexpected: []string{"2.weight"}},
		{name: "non-strict", edit: func(m map[string]*vram.Tensor) { delete(m, "0.bias"); m["fc.w"] = f64(vram.Shape{1}, 0) },
			missing: []string{"0.bias"}, unexpected: []string{"fc.w"}, loaded: true},
		{name: "shape mismatch", edit: func(m map[string]*vram.Tensor) { m["0.bias"] = f64(vram.Shape{3}, 1, 2, 3) }, kind: vram.ErrShape},
		{name: "released", edit: func(m map[string]*vram.Tensor) { m["0.bias"].Release() }, strict: true, kind: vram.ErrReleased},
		{name: "nil", edit: func(m map[string]*vram.Tensor) { m["0.bias"] = nil }, strict: true, kind: vram.ErrReleased},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := nn.NewSequential(nn.NewLinear(2, 2), nn.NewBatchNorm1d(2))
			before := nn.StateDict(m)["0.weight"].Float64s()
			sd := full()
			if tt.edit != nil {
				tt.edit(sd)
			}
			res, err := nn.LoadStateDict(m, sd, tt.strict)
			if tt.kind != nil {
				if !errors.Is(err, tt.kind) {
					t.Fatalf("error %v, want %v", err, tt.kind)
				}
				if got := nn.StateDict(m)["0.weight"].Float64s(); !slices.Equal(got, before) {
					t.Errorf("a refused load changed the model: %v", got)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Missing, tt.missing) || !slices.Equal(res.Unexpected, tt.unexpected) {
				t.Errorf("result %+v, want missing %v unexpected %v", res, tt.missing, tt.unexpected)
			}
			if tt.loaded {
				got := nn.StateDict(m)
				if w := got["0.weight"]; w.DType() != vram.Float32 || !slices.Equal(w.Float64s(), []float64{1, 2, 3, 4}) {
					t.Errorf("0.weight = %s %v", w.DType(), w.Float64s())
				}
				if n := got["1.num_batches_tracked"].Int64s(); n[0] != 15 {
					t.Errorf("num_batches_tracked = %v", n)
				}
			}
			// The caller's tensors stay the caller's.
			for k, v := range sd {
				if v != nil && !v.Released() && v.DType() == vram.Float64 && k == "0.weight" && !slices.Equal(v.Float64s(), []float64{1, 2, 3, 4}) {
					t.Errorf("%s changed", k)
				}
			}
		})
	}
	if _, err := nn.LoadStateDict(nil, nil, true); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("nil module: %v", err)
	}
}
