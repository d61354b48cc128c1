package cpu_test

import (
	"math"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
)

// TestFusedStepsExact checks that the CPU's fused optimizer steps give
// the reference's values bit for bit (the conformance suite allows a last
// place): each operation rounded to float32, the state to its dtype.
func TestFusedStepsExact(t *testing.T) {
	dev := device(t)
	fa, fs := dev.(backend.FusedAdam), dev.(backend.FusedSGD)
	const n = 4099
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Float16, backend.BFloat16} {
		vals := func(scale float64, seed int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = backendtest.Quantize(dt, scale*math.Sin(float64(i*seed+1)))
			}
			return v
		}
		host := [][]float64{vals(1, 3), vals(1e-3, 5), make([]float64, n), make([]float64, n)}
		views := make([]backend.View, len(host))
		for k := range host {
			views[k] = backendtest.NewView(t, dev, dt, []int{n}, host[k])
		}
		cfg := backend.AdamStepConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Decoupled: true}
		sgd := backend.SGDStepConfig{LR: 0.01, Momentum: 0.9, Dampening: 0.1, WeightDecay: 1e-4}
		for step := 1; step <= 3; step++ {
			cfg.Step = step
			if err := fa.AdamStep(dev.DefaultStream(), views[0], views[1], views[2], views[3], cfg); err != nil {
				t.Fatal(err)
			}
			backendtest.AdamStepRef(dt, host[0], host[1], host[2], host[3], cfg)
			sgd.First = step == 1
			if err := fs.SGDStep(dev.DefaultStream(), views[0], views[1], views[2], sgd); err != nil {
				t.Fatal(err)
			}
			backendtest.SGDStepRef(dt, host[0], host[1], host[2], sgd)
		}
		for k, name := range []string{"p", "g", "m (then the momentum buffer)", "v"} {
			got := backendtest.ReadView(t, dev, views[k])
			for i, want := range host[k] {
				if got[i] != want && !(math.IsNaN(got[i]) && math.IsNaN(want)) {
					t.Fatalf("%s: %s[%d] = %v, want %v", dt, name, i, got[i], want)
				}
			}
		}
	}
}
