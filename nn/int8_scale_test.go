package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestSetInt8WeightRefusesBadScales: a scale holding NaN, an infinity,
// zero or a negative value is refused with vram.ErrArgument, leaving the
// layer a float one, on the CPU and a sim device: such a layer's Forward
// gave NaN, or the bias alone, silently.
func TestSetInt8WeightRefusesBadScales(t *testing.T) {
	tests := []struct {
		name  string
		scale []float64
		ok    bool
	}{
		{"positive", []float64{0.5, 2}, true},
		{"tiny", []float64{math.SmallestNonzeroFloat32, 1}, true},
		{"NaN", []float64{0.5, math.NaN()}, false},
		{"Inf", []float64{math.Inf(1), 1}, false},
		{"-Inf", []float64{1, math.Inf(-1)}, false},
		{"zero", []float64{0, 1}, false},
		{"negative", []float64{1, -0.5}, false},
	}
	for _, d := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tt := range tests {
			t.Run(tt.name+"/"+d.String(), func(t *testing.T) {
				l := nn.NewLinear(3, 2, d)
				defer nn.Release(l)
				wq := vram.Ones(vram.Shape{2, 3}, vram.Int8, d)
				scale := vram.FromSlice(tt.scale, vram.Shape{2}, d, vram.Float32)
				err := l.SetInt8Weight(wq, scale)
				if tt.ok {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				defer wq.Release()
				defer scale.Release()
				if !errors.Is(err, vram.ErrArgument) {
					t.Fatalf("SetInt8Weight = %v, want an error matching vram.ErrArgument", err)
				}
				if l.Scale != nil || l.Weight.DType() != vram.Float32 || l.Weight.Released() || len(l.Parameters()) != 2 {
					t.Errorf("the layer changed: scale %v, weight %s, %d parameters", l.Scale, l.Weight.DType(), len(l.Parameters()))
				}
			})
		}
	}
}
