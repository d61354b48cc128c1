package swa_test

import (
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim/swa"
)

// TestAveragedModelOfConvertedModel averages a model converted to another
// dtype after its copy was made: the copy keeps its float32 averages of
// the model's values, for every average function and with buffers.
func TestAveragedModelOfConvertedModel(t *testing.T) {
	swaRule := func(avg, cur float64, n int) float64 { return avg + (cur-avg)/float64(n+1) }
	tests := []struct {
		name    string
		opts    swa.Options
		convert func(m nn.Module)
		rule    func(avg, cur float64, n int) float64
	}{
		{"SWA half", swa.Options{}, func(m nn.Module) { nn.ConvertDType(m, vram.Float16) }, swaRule},
		{"SWA bfloat16 buffers", swa.Options{UseBuffers: true}, func(m nn.Module) { nn.ConvertDType(m, vram.BFloat16) }, swaRule},
		{"SWA float64 on sim", swa.Options{Device: vram.Sim(0)}, func(m nn.Module) { nn.ConvertDType(m, vram.Float64) }, swaRule},
		{"EMA half", swa.Options{MultiAvgFunc: swa.EMA(0.5)}, func(m nn.Module) { nn.ConvertDType(m, vram.Float16) },
			func(avg, cur float64, _ int) float64 { return avg + 0.5*(cur-avg) }},
		{"avg_fn half", swa.Options{AvgFunc: func(a, c *vram.Tensor, _ int64) *vram.Tensor { return a.Add(c).MulScalar(0.5) }},
			func(m nn.Module) { nn.ConvertDType(m, vram.Float16) },
			func(avg, cur float64, _ int) float64 { return (avg + cur) / 2 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := nn.NewLinear(3, 2)
			a, err := swa.NewAveragedModel(m, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(a)
			setValues(m, 1)
			if err := a.UpdateParameters(m); err != nil {
				t.Fatal(err)
			}
			var want [][]float64
			for _, p := range m.Parameters() {
				want = append(want, p.Float64s())
			}
			tc.convert(m)
			setValues(m, 2)
			if err := a.UpdateParameters(m); err != nil {
				t.Fatalf("second update: %v", err)
			}
			for k, p := range a.Module().Parameters() {
				if p.DType() != vram.Float32 {
					t.Fatalf("average %d is %v, want float32", k, p.DType())
				}
				cur := m.Parameters()[k].Float64s()
				for i := range want[k] {
					want[k][i] = tc.rule(want[k][i], cur[i], 1)
				}
				checkClose(t, "average", p.Float64s(), want[k], 1e-6)
			}
			if n := a.NumAveraged(); n != 2 {
				t.Errorf("n_averaged %d, want 2", n)
			}
		})
	}
}
