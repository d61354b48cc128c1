package torchload

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestLoadPyTorchRefusesBadInt8Scales: a checkpoint whose quantized
// layer's "scale" holds NaN, an infinity, zero or a negative value is
// refused with an error matching vram.ErrArgument that names the key, and
// the model is left as it was, as nn.Load refuses such a file.
func TestLoadPyTorchRefusesBadInt8Scales(t *testing.T) {
	quantized := func(w float64, scale []float64) *nn.Linear {
		l := nn.NewLinear(3, 2)
		wq := vram.Full(l.Weight.Shape(), w, vram.Int8)
		if err := l.SetInt8Weight(wq, vram.FromSlice(scale, vram.Shape{2}, vram.Float32)); err != nil {
			t.Fatal(err)
		}
		return l
	}
	tests := []struct {
		name  string
		scale []float64
		ok    bool
	}{
		{"positive", []float64{0.5, 2}, true},
		{"NaN", []float64{math.NaN(), 2}, false},
		{"Inf", []float64{0.5, math.Inf(1)}, false},
		{"zero", []float64{0, 2}, false},
		{"negative", []float64{-0.5, 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := quantized(2, []float64{1, 1})
			defer nn.Release(src)
			vram.NoGrad(func() {
				bad := vram.FromSlice(tt.scale, vram.Shape{2}, vram.Float32)
				src.Scale.CopyFrom(bad)
				bad.Release()
			})
			path := saveTorch(t, src, "", nil)
			for _, strict := range []bool{true, false} {
				m := quantized(1, []float64{3, 4})
				before := map[string][]byte{}
				for k, v := range nn.StateDict(m) {
					before[k] = v.RawBytes()
				}
				_, err := LoadPyTorch(m, path, strict)
				switch {
				case tt.ok && err != nil:
					t.Fatal(err)
				case tt.ok:
				case !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), `"scale"`):
					t.Fatalf("strict %v: error %v, want one matching vram.ErrArgument naming \"scale\"", strict, err)
				default:
					for k, v := range nn.StateDict(m) {
						if !bytes.Equal(v.RawBytes(), before[k]) {
							t.Errorf("strict %v: a refused load changed %s", strict, k)
						}
					}
				}
				nn.Release(m)
			}
		})
	}
}
