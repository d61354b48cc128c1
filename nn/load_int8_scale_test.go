package nn_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// int8Model returns a Sequential of two weight-only int8 quantized Linear
// layers (3 → 2 → 2) on d, with int8 weights of value w and the scales
// scale0 and scale1, of dtype dt.
func int8Model(t *testing.T, d vram.Device, w float64, scale0, scale1 []float64, dt vram.DType) *nn.Sequential {
	t.Helper()
	m := nn.NewSequential(nn.NewLinear(3, 2, d), nn.NewLinear(2, 2, d))
	for i, s := range [][]float64{scale0, scale1} {
		l := m.At(i).(*nn.Linear)
		wq := vram.Full(l.Weight.Shape(), w, vram.Int8, d)
		if err := l.SetInt8Weight(wq, vram.FromSlice(s, vram.Shape{2}, d, dt)); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// TestLoadRefusesBadInt8Scales: a quantized layer's scale holding NaN, an
// infinity, zero or a negative value, or one that becomes so in the
// model's dtype, is refused by Load, LoadNonStrict and LoadStateDict
// with an error matching vram.ErrArgument that names the key and counts
// the bad values, as SetInt8Weight refuses it, and the model is left as
// it was: such a scale used to be loaded, and the layer then gave zeros
// or NaN.
func TestLoadRefusesBadInt8Scales(t *testing.T) {
	tests := []struct {
		name    string
		scale   []float64 // the file's "1.scale", float32
		modelDT vram.DType
		bad     int // how many of scale are refused; 0: it loads
	}{
		{"positive", []float64{0.5, 2}, vram.Float32, 0},
		{"tiny", []float64{math.SmallestNonzeroFloat32, 1}, vram.Float32, 0},
		{"NaN", []float64{0.5, math.NaN()}, vram.Float32, 1},
		{"Inf", []float64{math.Inf(1), 1}, vram.Float32, 1},
		{"-Inf", []float64{1, math.Inf(-1)}, vram.Float32, 1},
		{"zero", []float64{0, 1}, vram.Float32, 1},
		{"negative", []float64{1, -0.5}, vram.Float32, 1},
		{"two bad", []float64{0, math.NaN()}, vram.Float32, 2},
		{"overflows float16", []float64{1e6, 1}, vram.Float16, 1},
		{"underflows float16", []float64{1, 1e-10}, vram.Float16, 1},
		{"fits float16", []float64{1e-3, 1e3}, vram.Float16, 0},
	}
	loaders := []struct {
		name string
		load func(m nn.Module, path string, sd map[string]*vram.Tensor) error
	}{
		{"Load", func(m nn.Module, path string, _ map[string]*vram.Tensor) error { return nn.Load(m, path) }},
		{"LoadNonStrict", func(m nn.Module, path string, _ map[string]*vram.Tensor) error {
			_, err := nn.LoadNonStrict(m, path)
			return err
		}},
		{"LoadStateDict strict", func(m nn.Module, _ string, sd map[string]*vram.Tensor) error {
			_, err := nn.LoadStateDict(m, sd, true)
			return err
		}},
		{"LoadStateDict", func(m nn.Module, _ string, sd map[string]*vram.Tensor) error {
			_, err := nn.LoadStateDict(m, sd, false)
			return err
		}},
	}
	for _, d := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tt := range tests {
			// The source: a model of other values whose last scale is
			// overwritten with the test's, which SetInt8Weight refuses.
			src := int8Model(t, d, 2, []float64{0.25, 0.5}, []float64{0.75, 1.5}, vram.Float32)
			vram.NoGrad(func() {
				bad := vram.FromSlice(tt.scale, vram.Shape{2}, d, vram.Float32)
				src.At(1).(*nn.Linear).Scale.CopyFrom(bad)
				bad.Release()
			})
			path := t.TempDir() + "/q.safetensors"
			if err := nn.Save(src, path); err != nil {
				t.Fatal(err)
			}
			for _, ld := range loaders {
				t.Run(fmt.Sprintf("%s/%s/%s", tt.name, ld.name, d), func(t *testing.T) {
					m := int8Model(t, d, 1, []float64{1, 2}, []float64{3, 4}, tt.modelDT)
					defer nn.Release(m)
					before := stateBytes(m)
					err := ld.load(m, path, nn.StateDict(src))
					if tt.bad == 0 {
						if err != nil {
							t.Fatal(err)
						}
						got := nn.StateDict(m)["1.scale"].Float64s()
						for i, v := range got {
							if want := tt.scale[i]; math.Abs(v-want) > 1e-3*want {
								t.Errorf("scale %d: %v, want %v", i, v, want)
							}
						}
						return
					}
					if !errors.Is(err, vram.ErrArgument) {
						t.Fatalf("load = %v, want an error matching vram.ErrArgument", err)
					}
					if msg := err.Error(); !strings.Contains(msg, `"1.scale"`) || !strings.Contains(msg, fmt.Sprintf("%d values", tt.bad)) {
						t.Errorf("error %q does not name \"1.scale\" and its %d bad values", msg, tt.bad)
					}
					after := stateBytes(m)
					for k, b := range before {
						if !bytes.Equal(after[k], b) {
							t.Errorf("%s changed in a refused load", k)
						}
					}
				})
			}
			nn.Release(src)
		}
	}
}

// embeddedLinear is a module of its own type around a Linear.
type embeddedLinear struct{ *nn.Linear }

// TestLoadRefusesBadInt8ScaleOfEmbeddedLinear: the scale of a quantized
// Linear that another module type embeds is checked too.
func TestLoadRefusesBadInt8ScaleOfEmbeddedLinear(t *testing.T) {
	m := embeddedLinear{nn.NewLinear(3, 2)}
	defer nn.Release(m)
	if err := m.SetInt8Weight(vram.Ones(vram.Shape{2, 3}, vram.Int8), vram.FromSlice([]float64{1, 2}, vram.Shape{2}, vram.Float32)); err != nil {
		t.Fatal(err)
	}
	before := stateBytes(m)
	sd := nn.StateDict(m)
	bad := vram.FromSlice([]float64{1, math.Inf(-1)}, vram.Shape{2})
	defer bad.Release()
	sd["scale"] = bad
	if _, err := nn.LoadStateDict(m, sd, true); !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), `"scale"`) {
		t.Fatalf("LoadStateDict = %v, want an error matching vram.ErrArgument naming \"scale\"", err)
	}
	for k, b := range stateBytes(m) {
		if !bytes.Equal(b, before[k]) {
			t.Errorf("%s changed in a refused load", k)
		}
	}
}
