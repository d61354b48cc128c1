package nn_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

func TestRMSNorm(t *testing.T) {
	r5 := 1 / math.Sqrt(5)
	tests := []struct {
		name   string
		layer  func(dev vram.Device) *nn.RMSNorm
		weight []float64 // set before Forward; nil leaves the ones (or none)
		x      []float64
		shape  vram.Shape
		want   []float64
	}{
		{"ones", func(d vram.Device) *nn.RMSNorm { return nn.NewRMSNorm([]int{2}, 0, vram.Float64, d) }, nil,
			[]float64{1, 3, 2, 4}, vram.Shape{2, 2}, []float64{r5, 3 * r5, 2 / math.Sqrt(10), 4 / math.Sqrt(10)}},
		{"weight", func(d vram.Device) *nn.RMSNorm { return nn.NewRMSNorm([]int{2}, 0, vram.Float64, d) }, []float64{2, -1},
			[]float64{1, 3}, vram.Shape{1, 2}, []float64{2 * r5, -3 * r5}},
		{"eps", func(d vram.Device) *nn.RMSNorm { return nn.NewRMSNorm([]int{2}, 11, vram.Float64, d) }, nil,
			[]float64{2, 2, 0, 0}, vram.Shape{2, 2}, []float64{2 / math.Sqrt(15), 2 / math.Sqrt(15), 0, 0}},
		{"two dimensions", func(d vram.Device) *nn.RMSNorm { return nn.NewRMSNorm([]int{2, 2}, 0, vram.Float64, d) }, nil,
			[]float64{1, 2, 2, 4}, vram.Shape{1, 2, 2}, []float64{0.4, 0.8, 0.8, 1.6}},
		{"no affine, default eps", func(vram.Device) *nn.RMSNorm { return nn.NewRMSNormNoAffine([]int{1}, -1) }, nil,
			[]float64{1e-8, -3}, vram.Shape{2, 1}, []float64{1e-8 / math.Sqrt(1e-16+0x1p-52), -3 / math.Sqrt(9+0x1p-52)}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				l := tc.layer(dev)
				defer nn.Release(l)
				if l.Weight != nil {
					checkValues(t, "initial weight", l.Weight.Float64s(), slices.Repeat([]float64{1}, l.Weight.NumElements()), 0)
				}
				if tc.weight != nil {
					set(l.Weight, tc.weight...)
				}
				x := vram.FromSlice(tc.x, tc.shape, vram.Float64, dev)
				defer x.Release()
				y := l.Forward(x)
				defer y.Release()
				if !slices.Equal(y.Shape(), tc.shape) || y.Device() != dev {
					t.Fatalf("shape %v on %v, want %v on %v", y.Shape(), y.Device(), tc.shape, dev)
				}
				checkValues(t, "output", y.Float64s(), tc.want, 1e-12)
			})
		}
	}
}

// TestRMSNormModule checks the parts RMSNorm shares with the other layers:
// its parameter and state-dict names, Format, a Sequential of it, loading
// a state dict, gradients to its weight, and Half keeping it float32.
func TestRMSNormModule(t *testing.T) {
	l := nn.NewRMSNorm([]int{3}, 1e-6)
	defer nn.Release(l)
	names := []string{}
	for _, p := range l.NamedParameters() {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"weight"}) {
		t.Fatalf("parameter names %v, want [weight]", names)
	}
	if got, want := nn.Format(l), "RMSNorm(weight [3])"; got != want {
		t.Errorf("Format = %q, want %q", got, want)
	}
	na := nn.NewRMSNormNoAffine([]int{3}, 1e-6)
	if len(na.Parameters()) != 0 || len(nn.StateDict(na)) != 0 || nn.Format(na) != "RMSNorm()" {
		t.Errorf("no affine: parameters %v, Format %q", na.Parameters(), nn.Format(na))
	}

	lin := nn.NewLinear(2, 3)
	seq := nn.NewSequential(lin, l)
	sd := nn.StateDict(seq)
	keys := make([]string, 0, len(sd))
	for k := range sd {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"0.bias", "0.weight", "1.weight"}; !slices.Equal(keys, want) {
		t.Fatalf("state dict keys %v, want %v", keys, want)
	}
	w := vram.FromSlice([]float32{2, 3, 4}, vram.Shape{3})
	defer w.Release()
	if _, err := nn.LoadStateDict(seq, map[string]*vram.Tensor{"0.weight": sd["0.weight"], "0.bias": sd["0.bias"], "1.weight": w}, true); err != nil {
		t.Fatalf("LoadStateDict: %v", err)
	}
	checkValues(t, "loaded weight", l.Weight.Float64s(), []float64{2, 3, 4}, 0)

	x := vram.FromSlice([]float32{1, -1}, vram.Shape{1, 2})
	defer x.Release()
	y := seq.Forward(x)
	y.Sum().Backward()
	if g := l.Weight.Grad(); g == nil || !slices.Equal(g.Shape(), vram.Shape{3}) {
		t.Fatalf("weight gradient %v, want one of shape [3]", g)
	}

	l.Half()
	if l.Weight.DType() != vram.Float32 {
		t.Fatalf("weight %v after Half, want float32", l.Weight.DType())
	}
	for _, dt := range []vram.DType{vram.Float16, vram.BFloat16} {
		// Squares of 300 overflow float16: the mean square is taken in float32.
		xh := vram.FromSlice([]float64{300, 0, -400}, vram.Shape{3}, dt)
		yh := l.Forward(xh)
		if yh.DType() != dt {
			t.Errorf("%s input: output %s, want the input's dtype", dt, yh.DType())
		}
		r := 1 / math.Sqrt(250000.0/3)
		checkValues(t, dt.String()+" output", yh.Float64s(), []float64{2 * 300 * r, 0, -4 * 400 * r}, 1e-2)
		xh.Release()
		yh.Release()
	}
}

func TestRMSNormErrors(t *testing.T) {
	tests := []struct {
		name string
		kind error
		fn   func()
	}{
		{"empty shape", vram.ErrArgument, func() { nn.NewRMSNorm(nil, 1e-6) }},
		{"negative size", vram.ErrArgument, func() { nn.NewRMSNormNoAffine([]int{2, -1}, 1e-6) }},
		{"NaN eps", vram.ErrArgument, func() { nn.NewRMSNorm([]int{2}, math.NaN()) }},
		{"infinite eps", vram.ErrArgument, func() { nn.NewRMSNorm([]int{2}, math.Inf(1)) }},
		{"input shape", vram.ErrShape, func() {
			l := nn.NewRMSNorm([]int{3}, 1e-6)
			defer nn.Release(l)
			x := vram.Ones(vram.Shape{3, 2})
			defer x.Release()
			l.Forward(x)
		}},
		{"integer input", vram.ErrDType, func() {
			l := nn.NewRMSNormNoAffine([]int{2}, 1e-6)
			x := vram.FromSlice([]int64{1, 2}, vram.Shape{2})
			defer x.Release()
			l.Forward(x)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			var ve *vram.Error
			if !errors.As(err, &ve) || !errors.Is(err, tc.kind) || ve.Op != "rms_norm" {
				t.Fatalf("got %v, want an rms_norm error of kind %v", err, tc.kind)
			}
		})
	}
}
