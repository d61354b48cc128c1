package vram_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
	"github.com/vramgo/vram/optim"
)

// The 16-bit numerics suite: reductions and composite ops of float16,
// bfloat16 and float32 tensors at sizes where a 16-bit accumulator stalls
// (a float16 sum of ones stops at 2048, a bfloat16 one at 256) or a 16-bit
// intermediate overflows (a float16 sum past 65504), compared with float64
// references computed on the host from the same (rounded) inputs.

// numDTypes are the dtypes of the suite.
var numDTypes = []vram.DType{vram.Float16, vram.BFloat16, vram.Float32}

// relTol is the relative error allowed in a result of dtype dt: a couple
// of roundings to dt, as PyTorch's results of these ops have.
func relTol(dt vram.DType) float64 {
	switch dt {
	case vram.Float16:
		return 2e-3
	case vram.BFloat16:
		return 1.6e-2
	}
	return 2e-5
}

// tiny is the absolute error allowed besides relTol: a few of dt's
// smallest steps near zero (float16 subnormals are 6e-8 apart).
func tiny(dt vram.DType) float64 {
	if dt == vram.Float16 {
		return 3e-7
	}
	return 1e-9
}

// numInput is one input of a case: a tensor on the device and its values
// as stored (rounded to the dtype), for the reference.
type numInput struct {
	t    *vram.Tensor
	vals []float64
}

// input makes a tensor of shape and dtype on dev from f(i), requiring grad
// when grad is set.
func input(dev vram.Device, dt vram.DType, shape vram.Shape, grad bool, f func(i int) float64) numInput {
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = f(i)
	}
	t := vram.FromSlice(v, shape, dt, dev)
	if grad {
		t.SetRequiresGrad(true)
	}
	return numInput{t: t, vals: t.Float64s()}
}

// noise returns a deterministic value in [-1, 1) for index i.
func noise(i, seed int) float64 {
	x := uint64(i)*0x9e3779b97f4a7c15 + uint64(seed)*0xbf58476d1ce4e5b9 + 1
	x ^= x >> 31
	x *= 0x94d049bb133111eb
	x ^= x >> 29
	return float64(x>>11)/(1<<52) - 1
}

// numCase is one op of the suite: run computes the op on dev in dt and
// returns named results, each with the device's values and the reference.
type numCase struct {
	name string
	run  func(t *testing.T, dev vram.Device, dt vram.DType) []numResult
}

type numResult struct {
	what      string
	got, want []float64
	atol      float64 // besides relTol and tiny
}

// rowsRef applies f to each row of length cols of vals.
func rowsRef(vals []float64, cols int, f func(row []float64) []float64) []float64 {
	var out []float64
	for r := 0; r < len(vals); r += cols {
		out = append(out, f(vals[r:r+cols])...)
	}
	return out
}

func meanOf(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func varOf(xs []float64, correction int) float64 {
	m, s := meanOf(xs), 0.0
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return s / float64(len(xs)-correction)
}

func filledWith(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func logSumExp(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = math.Max(m, x)
	}
	s := 0.0
	for _, x := range xs {
		s += math.Exp(x - m)
	}
	return m + math.Log(s)
}

var numCases = []numCase{
	{"mean of 100000 ones", func(t *testing.T, dev vram.Device, dt vram.DType) []numResult {
		x := input(dev, dt, vram.Shape{100000}, true, func(int) float64 { return 1 })
		m := x.t.Mean()
		m.Backward()
		return []numResult{
			{"mean", []float64{m.Item()}, []float64{1}, 0},
			{"gradient", x.t.Grad().Float64s(), filledWith(100000, 1e-5), 0},
		}
	}},
	{"mean of 1<<20 values", func(t *testing.T, dev vram.Device, dt vram.DType) []numResult {
		x := input(dev, dt, vram.Shape{1 << 20}, false, func(i int) float64 { return 3 + noise(i, 1) })
		return []numResult{{"mean", []float64{x.t.Mean().Item()}, []float64{meanOf(x.vals)}, 0}}
	}},
	{"sum of 1<<20 values", func(t *testing.T, dev vram.Device, dt vram.DType) []numResult {
		// About 52000: within float16's range, far past where a float16
		// accumulator stops growing (adding 0.05 to 64 changes nothing).
		x := input(dev, dt, vram.Shape{1 << 20}, false, func(i int) float64 { return float64(i%100+1) / 1000 })
		want := 0.0
		for _, v := range x.vals {
			want += v
		}
		ones := input(dev, dt, vram.Shape{1 << 20}, false, func(int) float64 { return 1 })
		wantOnes := float64(1 << 20)
		if dt == vram.Float16 {
			wantOnes = math.Inf(1) // past 65504, as in PyTorch
		}
		return []numResult{
			{"sum", []float64{x.t.Sum().Item()}, []float64{want}, 0},
			{"sum of ones", []float64{ones.t.Sum().Item()}, []float64{wantOnes}, 0},
		}
	}},
	{"mean over a long dimension", func(t *testing.T, dev vram.Device, dt vram.DType) []numResult {
		x := input(dev, dt, vram.Shape{3, 100000}, false, func(i int) float64 { return 5 + 2*noise(i, 2) })
		tr := x.t.T().MeanKeepDim(0) // the strided (column) form of the same means
		return []numResult{
			{"rows", x.t.Mean(1).Float64s(), rowsRef(x.vals, 100000, func(r []float64) []float64 { return []float64{meanOf(r)} }), 0},
			{"columns of the transpose", tr.Float64s(), rowsRef(x.vals, 100000, func(r []float64) []float64 { return []float64{meanOf(r)} }), 0},
		}
	}},
	{"var and std", func(t *testing.T, dev vram.Device, dt vram.DType) []numResult {
		// Deviations of about 10 around 100: squares summed past 65504.
		x := input(dev, dt, vram.Shape{2, 100000}, true, func(i int) float64 { return 100 + 17*noise(i, 3) })
		v := x.t.Var([]int{1}, 1, false)
		sd := x.t.Std(nil, 0, false)
		sd.Backward()
		// d std / dx = (x - mean) / (n · std)
		n := float64(len(x.vals))
		m, s := meanOf(x.vals), math.Sqrt(varOf(x.vals, 0))
		grad := make([]float64, len(x.vals))
		for i, xv := range x.vals {
			grad[i] = (xv - m) / (n * s)
		}
		return []numResult{
			{"var", v.Float64s(), rowsRef(x.vals, 100000, func(r []float64) []float64 { return []float64{varOf(r, 1)} }), 0},
			{"std", []float64{sd.Item()}, []float64{s}, 0},
			{"std gradient", x.t.Grad().Float64s(), grad, 1e-7},
		}
	}},
	{"softmax over 100000 classes", func(t *testing.T, dev vram.Device, dt vram.DType) []numResult {
		// Exponentials near 1: their sum passes 65504.
		x := input(dev, dt, vram.Shape{2, 100000}, true, func(i int) float64 { return noise(i, 4) / 8 })
		r := input(dev, dt, vram.Shape{2, 100000}, false, func(i int) float64 { return noise(i, 15) })
		sm := x.t.Softmax(1)
		ls := x.t.LogSoftmax(-1)
		// The gradients of sum(softmax·r) and sum(log_softmax·r).
		sm.Mul(r.t).Sum().Backward()
		gsm := x.t.Grad().Float64s()
		x.t.ZeroGrad()
		ls.Mul(r.t).Sum().Backward()
		gls := x.t.Grad().Float64s()
		wantSM, wantLS := make([]float64, len(x.vals)), make([]float64, len(x.vals))
		for row := range 2 {
			xs, rs := x.vals[row*100000:(row+1)*100000], r.vals[row*100000:(row+1)*100000]
			l, dot, sum := logSumExp(xs), 0.0, 0.0
			for i, v := range xs {
				dot += math.Exp(v-l) * rs[i]
				sum += rs[i]
			}
			for i, v := range xs {
				y := math.Exp(v - l)
				wantSM[row*100000+i] = y * (rs[i] - dot)
				wantLS[row*100000+i] = rs[i] - y*sum
			}
		}
		return []numResult{
			{"softmax gradient", gsm, wantSM, 0},
			{"log_softmax gradient", gls, wantLS, 1e-3},
			{"softmax", sm.Float64s(), rowsRef(x.vals, 100000, func(r []float64) []float64 {
				l, out := logSumExp(r), make([]float64, len(r))
				for i, v := range r {
					out[i] = math.Exp(v - l)
				}
				return out
			}), 0},
			{"log_softmax", ls.Float64s(), rowsRef(x.vals, 100000, func(r []float64) []float64 {
				l, out := logSumExp(r), make([]float64, len(r))
				for i, v := range r {
					out[i] = v - l
				}
				return out
			}), 0},
		}
	}},
	{"cross entropy", func(t *testing.T, dev vram.Device, dt vram.DType) []numResult {
		// Wide: a log-sum-exp over 50000 classes; tall: a mean over 65536
		// losses of about 1.4 (a sum past 65504).
		var out []numResult
		for _, sh := range [][2]int{{8, 50000}, {65536, 4}} {
			rows, cols := sh[0], sh[1]
			x := input(dev, dt, vram.Shape{rows, cols}, true, func(i int) float64 { return 2 * noise(i, 5) })
			tg := make([]int64, rows)
			for i := range tg {
				tg[i] = int64(i*7919) % int64(cols)
			}
			targets := vram.FromSlice(tg, vram.Shape{rows}, dev)
			loss := vram.CrossEntropy(x.t, targets)
			loss.Backward()
			want, grad := 0.0, make([]float64, len(x.vals))
			for r := range rows {
				row := x.vals[r*cols : (r+1)*cols]
				l := logSumExp(row)
				want += (l - row[tg[r]]) / float64(rows)
				for c, v := range row {
					grad[r*cols+c] = math.Exp(v-l) / float64(rows)
				}
				grad[r*cols+int(tg[r])] -= 1 / float64(rows)
			}
			what := fmt.Sprintf("%dx%d", rows, cols)
			out = append(out,
				numResult{what + " loss", []float64{loss.Item()}, []float64{want}, 0},
				numResult{what + " gradient", x.t.Grad().Float64s(), grad, 2e-6})
		}
		return out
	}},
	{"mse loss", func(t *testing.T, dev vram.Device, dt vram.DType) []numResult {
		const n = 1 << 20
		p := input(dev, dt, vram.Shape{n}, true, func(i int) float64 { return 3 * noise(i, 6) })
		q := input(dev, dt, vram.Shape{n}, false, func(i int) float64 { return 3 * noise(i, 7) })
		loss := vram.MSELoss(p.t, q.t)
		loss.Backward()
		want, grad := 0.0, make([]float64, n)
		for i := range p.vals {
			d := p.vals[i] - q.vals[i]
			want += d * d / n
			grad[i] = 2 * d / n
		}
		return []numResult{
			{"loss", []float64{loss.Item()}, []float64{want}, 0},
			{"gradient", p.t.Grad().Float64s(), grad, 0},
		}
	}},
	{"layer norm", func(t *testing.T, dev vram.Device, dt vram.DType) []numResult {
		const cols = 100000
		x := input(dev, dt, vram.Shape{3, cols}, true, func(i int) float64 { return 50 + 4*noise(i, 8) })
		w := input(dev, dt, vram.Shape{cols}, true, func(i int) float64 { return 1 + noise(i, 9)/2 })
		b := input(dev, dt, vram.Shape{cols}, true, func(i int) float64 { return noise(i, 10) })
		y := vram.LayerNorm(x.t, []int{cols}, w.t, b.t, 1e-5)
		y.Sum().Backward()
		want := make([]float64, 0, len(x.vals))
		gw, gx := make([]float64, cols), make([]float64, 0, len(x.vals))
		gb := filledWith(cols, 3)
		for r := range 3 {
			row := x.vals[r*cols : (r+1)*cols]
			m, rs := meanOf(row), 1/math.Sqrt(varOf(row, 0)+1e-5)
			xhat := make([]float64, cols)
			var m1, m2 float64
			for c, v := range row {
				xhat[c] = (v - m) * rs
				want = append(want, xhat[c]*w.vals[c]+b.vals[c])
				gw[c] += xhat[c]
				m1 += w.vals[c] / cols
				m2 += w.vals[c] * xhat[c] / cols
			}
			for c := range row {
				gx = append(gx, rs*(w.vals[c]-m1-xhat[c]*m2))
			}
		}
		return []numResult{
			{"output", y.Float64s(), want, 1e-3},
			{"input gradient", x.t.Grad().Float64s(), gx, 1e-4},
			{"weight gradient", w.t.Grad().Float64s(), gw, 1e-3},
			{"bias gradient", b.t.Grad().Float64s(), gb, 0},
		}
	}},
	{"max and its ties", func(t *testing.T, dev vram.Device, dt vram.DType) []numResult {
		// 100000 equal maxima share the gradient: 1e-5 each (a float16
		// count of ties overflows).
		x := input(dev, dt, vram.Shape{100000}, true, func(int) float64 { return 2 })
		m := x.t.Max()
		m.Backward()
		y := input(dev, dt, vram.Shape{1 << 20}, false, func(i int) float64 { return noise(i, 11) })
		want := math.Inf(-1)
		for _, v := range y.vals {
			want = math.Max(want, v)
		}
		return []numResult{
			{"max", []float64{m.Item(), y.t.Max().Item()}, []float64{2, want}, 0},
			{"gradient", x.t.Grad().Float64s(), filledWith(100000, 1e-5), 0},
		}
	}},
	{"embedding gradient", func(t *testing.T, dev vram.Device, dt vram.DType) []numResult {
		// Row 0 is looked up 30000 times: its gradient accumulates past
		// where float16 (2048) and bfloat16 (256) additions of 1 stop.
		const n = 30000
		w := input(dev, dt, vram.Shape{3, 4}, true, func(i int) float64 { return noise(i, 12) })
		idx := make([]int64, n)
		for i := range idx {
			if i%1000 == 999 {
				idx[i] = 2
			}
		}
		vram.Embedding(vram.FromSlice(idx, vram.Shape{n}, dev), w.t).Sum().Backward()
		want := append(append(filledWith(4, n-n/1000), filledWith(4, 0)...), filledWith(4, n/1000)...)
		return []numResult{{"weight gradient", w.t.Grad().Float64s(), want, 0}}
	}},
	{"matmul with a long inner dimension", func(t *testing.T, dev vram.Device, dt vram.DType) []numResult {
		const k = 100000
		a := input(dev, dt, vram.Shape{2, k}, false, func(i int) float64 { return 1 + noise(i, 13)/4 })
		b := input(dev, dt, vram.Shape{k, 2}, false, func(i int) float64 { return 0.5 + noise(i, 14)/4 })
		want := make([]float64, 4)
		for i := range 2 {
			for j := range 2 {
				for l := range k {
					want[i*2+j] += a.vals[i*k+l] * b.vals[l*2+j]
				}
			}
		}
		// float32 sums of 100000 products: a random walk of roundings,
		// about 1e-5 of the total on a GPU.
		return []numResult{{"product", a.t.MatMul(b.t).Float64s(), want, 1e-4 * want[0]}}
	}},
}

// runNumerics runs the suite on dev.
func runNumerics(t *testing.T, dev vram.Device) {
	for _, c := range numCases {
		for _, dt := range numDTypes {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				vram.Tidy(func() {
					for _, r := range c.run(t, dev, dt) {
						checkNum(t, r, dt)
					}
				})
			})
		}
	}
}

func checkNum(t *testing.T, r numResult, dt vram.DType) {
	t.Helper()
	if len(r.got) != len(r.want) {
		t.Fatalf("%s: %d values, want %d", r.what, len(r.got), len(r.want))
	}
	bad := 0
	for i, want := range r.want {
		got := r.got[i]
		ok := got == want
		if !ok && !math.IsInf(want, 0) {
			ok = math.Abs(got-want) <= relTol(dt)*math.Abs(want)+tiny(dt)+r.atol
		}
		if !ok {
			if bad < 3 {
				t.Errorf("%s: element %d = %v, want %v", r.what, i, got, want)
			}
			bad++
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d of %d elements differ", r.what, bad, len(r.want))
	}
}

func TestHalfNumerics(t *testing.T) {
	devs := []vram.Device{vram.CPU}
	if vram.SimDeviceCount() > 0 {
		devs = append(devs, vram.Sim(0))
	}
	for _, dev := range devs {
		t.Run(dev.String(), func(t *testing.T) { runNumerics(t, dev) })
	}
}

// The optimizer runs of the 16-bit tests: a [29, 141] parameter, three steps
// with gradients of about 1e-4, whose squares (Adam's second moment) are
// below float16's smallest subnormal, and an eps that rounds to 0 in
// float16: composing Adam from float16 ops divides by zero there.
const (
	optRows, optCols = 29, 141
	optSteps         = 3
)

func optValues(seed int, scale float64) []float64 {
	v := make([]float64, optRows*optCols)
	for i := range v {
		v[i] = scale * noise(i, seed)
	}
	return v
}

// newOptimizer returns the optimizer of the 16-bit tests named name.
func newOptimizer(t *testing.T, name string, p *vram.Tensor) optim.Optimizer {
	t.Helper()
	var o optim.Optimizer
	var err error
	switch name {
	case "adam":
		o, err = optim.NewAdam([]*vram.Tensor{p}, optim.AdamConfig{LR: 1e-3})
	case "adamw":
		o, err = optim.NewAdamW([]*vram.Tensor{p}, optim.AdamConfig{LR: 1e-3, WeightDecay: 0.01})
	default:
		o, err = optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4})
	}
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// halfOptimizerRun runs optimizer name for optSteps steps on a parameter of
// dtype dt on device d and returns the parameter's values. With strided
// set, the parameter is a transposed view (which the fused steps decline,
// so that the optimizer composes the step).
func halfOptimizerRun(t *testing.T, d vram.Device, dt vram.DType, name string, strided ...bool) []float32 {
	t.Helper()
	vals := optValues(1, 1)
	var p *vram.Tensor
	if len(strided) > 0 && strided[0] {
		tr := make([]float64, len(vals))
		for i := range optRows {
			for j := range optCols {
				tr[j*optRows+i] = vals[i*optCols+j]
			}
		}
		base := vram.FromSlice(tr, vram.Shape{optCols, optRows}, dt, d)
		p = base.T()
		base.Release()
	} else {
		p = vram.FromSlice(vals, vram.Shape{optRows, optCols}, dt, d)
	}
	defer p.Release()
	p.SetRequiresGrad(true)
	o := newOptimizer(t, name, p)
	for step := range optSteps {
		p.SetGrad(vram.FromSlice(optValues(step+2, 1e-4), vram.Shape{optRows, optCols}, dt, d))
		o.Step()
	}
	if r, ok := o.(interface{ Release() }); ok {
		r.Release()
	}
	c := p.Contiguous().CPU()
	defer c.Release()
	return c.Float32s()
}

// TestHalfOptimizers checks Adam, AdamW and SGD on float16, bfloat16 and
// float32 parameters on the CPU and a sim device: the two agree bit for
// bit, match the fused steps' reference (float32 arithmetic, state rounded
// to the dtype) exactly, stay finite with gradients whose squares vanish
// in float16, and the composed step of a strided parameter agrees with
// the fused one.
func TestHalfOptimizers(t *testing.T) {
	for _, dt := range numDTypes {
		for _, name := range []string{"adam", "adamw", "sgd"} {
			t.Run(dt.String()+"/"+name, func(t *testing.T) {
				bdt := backend.DType(dt)
				q := func(v []float64) []float64 {
					for i := range v {
						v[i] = backendtest.Quantize(bdt, v[i])
					}
					return v
				}
				p := q(optValues(1, 1))
				m, v := make([]float64, len(p)), make([]float64, len(p))
				for step := range optSteps {
					g := q(optValues(step+2, 1e-4))
					switch name {
					case "sgd":
						backendtest.SGDStepRef(bdt, p, g, m, backend.SGDStepConfig{LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4, First: step == 0})
					default:
						c := backend.AdamStepConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: step + 1}
						if name == "adamw" {
							c.WeightDecay, c.Decoupled = 0.01, true
						}
						backendtest.AdamStepRef(bdt, p, g, m, v, c)
					}
				}
				cpu := halfOptimizerRun(t, vram.CPU, dt, name)
				for i, want := range p {
					if got := float64(cpu[i]); got != want || math.IsNaN(got) || math.IsInf(got, 0) {
						t.Fatalf("cpu: element %d = %v, want %v", i, got, want)
					}
				}
				if vram.SimDeviceCount() > 0 {
					sim := halfOptimizerRun(t, vram.Sim(0), dt, name)
					for i := range cpu {
						if sim[i] != cpu[i] {
							t.Fatalf("sim: element %d = %v, cpu %v", i, sim[i], cpu[i])
						}
					}
				}
				composed := halfOptimizerRun(t, vram.CPU, dt, name, true)
				for i, want := range p {
					if got := float64(composed[i]); !(math.Abs(got-want) <= relTol(dt)*math.Abs(want)+tiny(dt)) {
						t.Fatalf("composed step: element %d = %v, want %v", i, got, want)
					}
				}
			})
		}
	}
}
