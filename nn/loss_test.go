package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// TestRegressionAndBinaryLosses checks each loss against values computed
// from PyTorch's formulas in float64, its gradient against central
// differences, its dtype under half precision (float32, as autocast
// gives), and that it leaves no memory behind on a sim device.
func TestRegressionAndBinaryLosses(t *testing.T) {
	pred := []float64{0.5, -1.2, 2.0, 0.1, 3.0, -0.3}
	target := []float64{0.4, 0.3, -1.0, 0.1, 0.0, -0.35}
	logits := []float64{0.5, -1.2, 20.0, -30.0, 0.0, 3.0}
	probs := []float64{0.2, 0.9, 1.0, 0.0, 0.5, 0.75}
	labels := []float64{1, 0, 1, 0, 0.5, 0.25}
	tests := []struct {
		name     string
		loss     func(p, t *vram.Tensor) *vram.Tensor
		in, tgt  []float64
		want     float64
		gradSafe bool // finite differences apply (no kink or clamp near the inputs)
	}{
		{"L1Loss", nn.L1Loss, pred, target, 1.275, true},
		{"SmoothL1Loss beta 1", func(p, t *vram.Tensor) *vram.Tensor { return nn.SmoothL1Loss(p, t, 1) }, pred, target, 1.0010416666666666, true},
		{"SmoothL1Loss beta 0.5", func(p, t *vram.Tensor) *vram.Tensor { return nn.SmoothL1Loss(p, t, 0.5) }, pred, target, 1.1270833333333334, true},
		{"SmoothL1Loss beta 0", func(p, t *vram.Tensor) *vram.Tensor { return nn.SmoothL1Loss(p, t, 0) }, pred, target, 1.275, true},
		{"HuberLoss delta 1", func(p, t *vram.Tensor) *vram.Tensor { return nn.HuberLoss(p, t, 1) }, pred, target, 1.0010416666666666, true},
		{"HuberLoss delta 0.5", func(p, t *vram.Tensor) *vram.Tensor { return nn.HuberLoss(p, t, 0.5) }, pred, target, 0.5635416666666667, true},
		{"BCEWithLogitsLoss", nn.BCEWithLogitsLoss, logits, labels, 0.6215156642855121, true},
		{"BCELoss", nn.BCELoss, probs, labels, 0.9528019124901591, false},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				// Garbage that earlier tests left is freed first, not
				// during the measurement.
				memtest.Settle(dev)
				before := vram.MemoryAllocated(dev)
				vram.Tidy(func() {
					x := vram.FromSlice(tc.in, vram.Shape{2, 3}, dev, vram.WithGrad())
					y := vram.FromSlice(tc.tgt, vram.Shape{2, 3}, dev)
					l := tc.loss(x, y)
					if got := l.Item(); !near(got, tc.want, 1e-12) {
						t.Fatalf("loss %v, want %v", got, tc.want)
					}
					l.Backward()
					if !tc.gradSafe {
						return
					}
					g := x.Grad().Float64s()
					const h = 1e-6
					for i := range tc.in {
						at := func(d float64) float64 {
							v := append([]float64(nil), tc.in...)
							v[i] += d
							return tc.loss(vram.FromSlice(v, vram.Shape{2, 3}, dev), y).Item()
						}
						if fd := (at(h) - at(-h)) / (2 * h); math.Abs(fd-g[i]) > 1e-6 {
							t.Errorf("d/dx[%d] = %v, finite difference %v", i, g[i], fd)
						}
					}
					half := tc.loss(x.Cast(vram.BFloat16), y.Cast(vram.BFloat16))
					if half.DType() != vram.BFloat16 || !near(half.Item(), tc.want, 0.05) {
						t.Errorf("bfloat16 inputs: %v %s, want bfloat16 near %v", half.Item(), half.DType(), tc.want)
					}
				})
				if after := vram.MemoryAllocated(dev); after != before {
					t.Errorf("%d bytes allocated after the loss, %d before", after, before)
				}
			})
		}
	}
}

// TestLossArguments checks the refusals of the losses' arguments.
func TestLossArguments(t *testing.T) {
	a := vram.Zeros(vram.Shape{2, 3})
	defer a.Release()
	b := vram.Zeros(vram.Shape{3, 2})
	defer b.Release()
	tests := []struct {
		name string
		fn   func()
		kind error
	}{
		{"smooth l1 negative beta", func() { nn.SmoothL1Loss(a, a, -1) }, vram.ErrArgument},
		{"smooth l1 NaN beta", func() { nn.SmoothL1Loss(a, a, math.NaN()) }, vram.ErrArgument},
		{"huber zero delta", func() { nn.HuberLoss(a, a, 0) }, vram.ErrArgument},
		{"huber infinite delta", func() { nn.HuberLoss(a, a, math.Inf(1)) }, vram.ErrArgument},
		{"bce shapes", func() { nn.BCELoss(a, b) }, vram.ErrShape},
		{"bce with logits shapes", func() { nn.BCEWithLogitsLoss(a, b) }, vram.ErrShape},
		{"bce nil", func() { nn.BCEWithLogitsLoss(nil, a) }, vram.ErrArgument},
		{"nll shapes", func() { nn.NLLLoss(a, vram.FromSlice([]int64{0, 1, 2}, nil)) }, vram.ErrShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(func() { vram.Tidy(tc.fn) })
			if !errors.Is(err, tc.kind) {
				t.Fatalf("error %v, want %v", err, tc.kind)
			}
		})
	}
}

// TestNLLLossIsCrossEntropyOfLogSoftmax checks NLLLoss of log-probabilities
// against CrossEntropyLoss of the logits, ignored targets included.
func TestNLLLossIsCrossEntropyOfLogSoftmax(t *testing.T) {
	vram.Tidy(func() {
		logits := vram.FromSlice([]float64{1, 2, 3, 0, 0, 0, -1, 4, 2}, vram.Shape{3, 3})
		targets := vram.FromSlice([]int64{2, -100, 1}, nil)
		ce := nn.CrossEntropyLoss(logits, targets).Item()
		nll := nn.NLLLoss(logits.LogSoftmax(1), targets).Item()
		if !near(ce, nll, 1e-15) {
			t.Fatalf("NLLLoss %v, CrossEntropyLoss %v", nll, ce)
		}
	})
}

// TestLossReductions checks each elementwise loss under each reduction
// and with BCE's weight and pos_weight against PyTorch's formulas in
// float64, the shape of ReductionNone (the broadcast shape), and the
// gradients of the logits, the targets' probabilities and the weights
// against central differences.
func TestLossReductions(t *testing.T) {
	pred := []float64{0.5, -1.2, 2.0, 0.1, 3.0, -0.3}
	target := []float64{0.4, 0.3, -1.0, 0.15, 0.0, -0.35}
	row := []float64{0.4, 0.3, -1.0} // broadcast to [2, 3]
	logits := []float64{0.5, -1.2, 20.0, -30.0, 0.0, 3.0}
	probs := []float64{0.2, 0.9, 0.6, 0.3, 0.5, 0.75}
	labels := []float64{1, 0, 1, 0, 0.5, 0.25}
	w := []float64{0.5, 2, 1.5} // [3], broadcast over rows
	pw := []float64{3, 0.5, 2}
	softplus := func(x float64) float64 { return math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))) }
	each := map[string]func(x, y float64, i int) float64{
		"mse": func(x, y float64, _ int) float64 { return (x - y) * (x - y) },
		"l1":  func(x, y float64, _ int) float64 { return math.Abs(x - y) },
		"smooth l1 0.5": func(x, y float64, _ int) float64 {
			if d := math.Abs(x - y); d < 0.5 {
				return 0.5 * d * d / 0.5
			} else {
				return d - 0.25
			}
		},
		"huber 0.5": func(x, y float64, _ int) float64 {
			if d := math.Abs(x - y); d <= 0.5 {
				return 0.5 * d * d
			} else {
				return 0.5 * (d - 0.25)
			}
		},
		"bce logits": func(x, y float64, _ int) float64 { return (1-y)*x + softplus(-x) },
		"bce logits weights": func(x, y float64, i int) float64 {
			return w[i%3] * ((1-y)*x + (1+(pw[i%3]-1)*y)*softplus(-x))
		},
		"bce weight": func(p, y float64, i int) float64 { return -w[i%3] * (y*math.Log(p) + (1-y)*math.Log(1-p)) },
	}
	type lossFn func(x, y, w, pw *vram.Tensor, r nn.Reduction) *vram.Tensor
	tests := []struct {
		name    string
		loss    lossFn
		in, tgt []float64
		tshape  vram.Shape
	}{
		{"mse", func(x, y, _, _ *vram.Tensor, r nn.Reduction) *vram.Tensor { return nn.MSELossWith(x, y, r) }, pred, target, vram.Shape{2, 3}},
		{"mse", func(x, y, _, _ *vram.Tensor, r nn.Reduction) *vram.Tensor { return nn.MSELossWith(x, y, r) }, pred, row, vram.Shape{3}},
		{"l1", func(x, y, _, _ *vram.Tensor, r nn.Reduction) *vram.Tensor { return nn.L1LossWith(x, y, r) }, pred, target, vram.Shape{2, 3}},
		{"l1", func(x, y, _, _ *vram.Tensor, r nn.Reduction) *vram.Tensor { return nn.L1LossWith(x, y, r) }, pred, row, vram.Shape{3}},
		{"smooth l1 0.5", func(x, y, _, _ *vram.Tensor, r nn.Reduction) *vram.Tensor { return nn.SmoothL1LossWith(x, y, 0.5, r) }, pred, target, vram.Shape{2, 3}},
		{"huber 0.5", func(x, y, _, _ *vram.Tensor, r nn.Reduction) *vram.Tensor { return nn.HuberLossWith(x, y, 0.5, r) }, pred, target, vram.Shape{2, 3}},
		{"bce logits", func(x, y, _, _ *vram.Tensor, r nn.Reduction) *vram.Tensor {
			return nn.BCEWithLogitsLossWith(x, y, nn.BCEOptions{Reduction: r})
		}, logits, labels, vram.Shape{2, 3}},
		{"bce logits weights", func(x, y, w, pw *vram.Tensor, r nn.Reduction) *vram.Tensor {
			return nn.BCEWithLogitsLossWith(x, y, nn.BCEOptions{Weight: w, PosWeight: pw, Reduction: r})
		}, logits, labels, vram.Shape{2, 3}},
		{"bce weight", func(x, y, w, _ *vram.Tensor, r nn.Reduction) *vram.Tensor {
			return nn.BCELossWith(x, y, nn.BCEOptions{Weight: w, Reduction: r})
		}, probs, labels, vram.Shape{2, 3}},
	}
	for _, tc := range tests {
		for _, r := range []nn.Reduction{nn.ReductionMean, nn.ReductionSum, nn.ReductionNone} {
			t.Run(tc.name+"/"+tc.tshape.String()+"/"+r.String(), func(t *testing.T) {
				before := vram.MemoryAllocated(vram.CPU)
				vram.Tidy(func() {
					per := make([]float64, len(tc.in))
					sum := 0.0
					for i, x := range tc.in {
						per[i] = each[tc.name](x, tc.tgt[i%len(tc.tgt)], i)
						sum += per[i]
					}
					want := map[nn.Reduction][]float64{nn.ReductionMean: {sum / 6}, nn.ReductionSum: {sum}, nn.ReductionNone: per}[r]
					x := vram.FromSlice(tc.in, vram.Shape{2, 3}, vram.WithGrad())
					y := vram.FromSlice(tc.tgt, tc.tshape)
					wt := vram.FromSlice(w, vram.Shape{3}, vram.WithGrad())
					pwt := vram.FromSlice(pw, vram.Shape{3}, vram.WithGrad())
					l := tc.loss(x, y, wt, pwt, r)
					if r == nn.ReductionNone && !slicesEqual(l.Shape(), vram.Shape{2, 3}) {
						t.Fatalf("shape %v, want [2 3]", l.Shape())
					}
					checkValues(t, "loss", l.Float64s(), want, 1e-12)
					total := func(x, wt, pwt *vram.Tensor) float64 {
						s := 0.0
						for _, v := range tc.loss(x, y, wt, pwt, r).Float64s() {
							s += v
						}
						return s
					}
					l.Sum().Backward()
					const h = 1e-6
					for _, p := range []struct {
						name string
						v    []float64
						t    *vram.Tensor
					}{{"x", tc.in, x}, {"weight", w, wt}, {"pos_weight", pw, pwt}} {
						g := p.t.Grad()
						if g == nil {
							continue // not an input of this loss
						}
						gs := g.Float64s()
						for i := range p.v {
							at := func(d float64) float64 {
								v := append([]float64(nil), p.v...)
								v[i] += d
								xs, ws, ps := x, wt, pwt
								switch p.name {
								case "x":
									xs = vram.FromSlice(v, vram.Shape{2, 3})
								case "weight":
									ws = vram.FromSlice(v, vram.Shape{3})
								default:
									ps = vram.FromSlice(v, vram.Shape{3})
								}
								return total(xs, ws, ps)
							}
							if fd := (at(h) - at(-h)) / (2 * h); math.Abs(fd-gs[i]) > 1e-6*(1+math.Abs(fd)) {
								t.Errorf("d/d%s[%d] = %v, finite difference %v", p.name, i, gs[i], fd)
							}
						}
					}
				})
				// Only growth is a leak: other tests' tensors may be freed meanwhile.
				if after := vram.MemoryAllocated(vram.CPU); after > before {
					t.Errorf("%d bytes allocated after the loss, %d before", after, before)
				}
			})
		}
	}
}

// TestLossReductionArguments checks the refusals of the options.
func TestLossReductionArguments(t *testing.T) {
	vram.Tidy(func() {
		a := vram.Zeros(vram.Shape{2, 3})
		tests := []struct {
			name string
			fn   func()
			kind error
		}{
			{"mse unknown reduction", func() { nn.MSELossWith(a, a, -1) }, vram.ErrArgument},
			{"l1 unknown reduction", func() { nn.L1LossWith(a, a, 3) }, vram.ErrArgument},
			{"huber unknown reduction", func() { nn.HuberLossWith(a, a, 1, 3) }, vram.ErrArgument},
			{"smooth l1 unknown reduction", func() { nn.SmoothL1LossWith(a, a, 0, 3) }, vram.ErrArgument},
			{"bce unknown reduction", func() { nn.BCELossWith(a, a, nn.BCEOptions{Reduction: 3}) }, vram.ErrArgument},
			{"bce pos weight", func() { nn.BCELossWith(a, a, nn.BCEOptions{PosWeight: vram.Ones(vram.Shape{3})}) }, vram.ErrArgument},
			{"bce weight shape", func() { nn.BCELossWith(a, a, nn.BCEOptions{Weight: vram.Ones(vram.Shape{2})}) }, vram.ErrShape},
			{"bce weight grows", func() { nn.BCELossWith(a, a, nn.BCEOptions{Weight: vram.Ones(vram.Shape{4, 2, 3})}) }, vram.ErrShape},
			{"bce logits pos weight shape", func() { nn.BCEWithLogitsLossWith(a, a, nn.BCEOptions{PosWeight: vram.Ones(vram.Shape{2})}) }, vram.ErrShape},
			{"mse nil", func() { nn.MSELossWith(a, nil, nn.ReductionSum) }, vram.ErrArgument},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				err := vram.Catch(func() { vram.Tidy(tc.fn) })
				if !errors.Is(err, tc.kind) {
					t.Fatalf("error %v, want %v", err, tc.kind)
				}
			})
		}
	})
}

// TestBCELossGradientAtZeroAndOne checks BCELoss's gradients against
// PyTorch's, (p − y)/max(p·(1 − p), 1e-12) for p and log(1 − p) − log p
// (logs clamped at −100) for y: finite where p is exactly 0 or 1, as
// saturated sigmoids give, where differentiating the clamped logs gives
// NaN.
func TestBCELossGradientAtZeroAndOne(t *testing.T) {
	p := []float64{0, 1, 0, 1, 0.3, 0.9}
	y := []float64{0, 1, 1, 0, 0.5, 0.2}
	w := []float64{2, 1, 0.5, 1, 3, 1}
	clampLog := func(v float64) float64 { return math.Max(math.Log(v), -100) }
	for _, r := range []nn.Reduction{nn.ReductionSum, nn.ReductionMean, nn.ReductionNone} {
		for _, weighted := range []bool{false, true} {
			t.Run(r.String()+map[bool]string{false: "", true: " weighted"}[weighted], func(t *testing.T) {
				vram.Tidy(func() {
					pt := vram.FromSlice(p, vram.Shape{2, 3}, vram.WithGrad())
					yt := vram.FromSlice(y, vram.Shape{2, 3}, vram.WithGrad())
					o := nn.BCEOptions{Reduction: r}
					if weighted {
						o.Weight = vram.FromSlice(w, vram.Shape{2, 3})
					}
					l := nn.BCELossWith(pt, yt, o)
					scale := 1.0
					if r == nn.ReductionMean {
						scale = 1.0 / 6
					}
					var wantL, wantP, wantY []float64
					sum := 0.0
					for i := range p {
						wi := 1.0
						if weighted {
							wi = w[i]
						}
						li := -wi * (y[i]*clampLog(p[i]) + (1-y[i])*clampLog(1-p[i]))
						sum += li
						wantL = append(wantL, li)
						wantP = append(wantP, scale*wi*(p[i]-y[i])/math.Max(p[i]*(1-p[i]), 1e-12))
						wantY = append(wantY, scale*wi*(clampLog(1-p[i])-clampLog(p[i])))
					}
					if r != nn.ReductionNone {
						wantL = []float64{sum * scale}
					}
					checkValues(t, "loss", l.Float64s(), wantL, 1e-12)
					l.Sum().Backward()
					checkValues(t, "d/dp", pt.Grad().Float64s(), wantP, 1e-12)
					checkValues(t, "d/dy", yt.Grad().Float64s(), wantY, 1e-12)
				})
			})
		}
	}
}

// BCELoss keeps its value where its gradient is huge: at p of 1 with a
// target of 0 (a saturated sigmoid) the loss is PyTorch's clamped 100, and
// near 1 it is −log(1 − p) to the precision of the dtype, in every
// floating-point dtype and on every device.
func TestBCELossValueNearSaturation(t *testing.T) {
	tests := []struct {
		name string
		p, y float64
	}{
		{"p=1 y=0", 1, 0},
		{"p=0 y=1", 0, 1},
		{"p=0.999 y=0", 0.999, 0},
		{"p=0.999 y=0.25", 0.999, 0.25},
		{"p=1e-3 y=1", 1e-3, 1},
		{"p=0.5 y=0.5", 0.5, 0.5},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, dt := range []vram.DType{vram.Float64, vram.Float32, vram.Float16, vram.BFloat16} {
			for _, tc := range tests {
				t.Run(dev.String()+" "+dt.String()+" "+tc.name, func(t *testing.T) {
					vram.Tidy(func() {
						p := vram.FromSlice([]float64{tc.p}, vram.Shape{1}, dt, dev, vram.WithGrad())
						y := vram.FromSlice([]float64{tc.y}, vram.Shape{1}, dt, dev)
						pv, yv := p.Float64s()[0], y.Float64s()[0]
						clampLog := func(v float64) float64 { return math.Max(math.Log(v), -100) }
						want := -(yv*clampLog(pv) + (1-yv)*clampLog(1-pv))
						l := nn.BCELossWith(p, y, nn.BCEOptions{Reduction: nn.ReductionSum})
						// A 16-bit loss is its dtype's rounding of the
						// float32 one.
						tol := map[vram.DType]float64{vram.Float16: 1e-3, vram.BFloat16: 8e-3}[dt]
						if got := l.Item(); !near(got, want, max(tol, 1e-5)) {
							t.Errorf("loss = %v, want %v", got, want)
						}
					})
				})
			}
		}
	}
}

// BCELoss refuses inputs that are not probabilities, as PyTorch's does
// ("all elements of input should be between 0 and 1"): values outside [0,
// 1] gave a meaningless finite loss or NaN.
func TestBCELossRefusesNonProbabilities(t *testing.T) {
	tests := []struct {
		name string
		p    []float64
		ok   bool
	}{
		{"in range", []float64{0, 0.5, 1}, true},
		{"empty", nil, true},
		{"above 1", []float64{0.5, 1.5, 0.2}, false},
		{"below 0", []float64{-0.01, 0.5, 0.2}, false},
		{"NaN", []float64{0.5, math.NaN(), 0.2}, false},
	}
	for _, dev := range []vram.Device{vram.CPU} {
		for _, tc := range tests {
			t.Run(dev.String()+" "+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					p := vram.FromSlice(tc.p, vram.Shape{len(tc.p)}, dev, vram.Float32)
					y := vram.ZerosLike(p)
					var err error
					func() {
						defer func() { err, _ = recover().(error) }()
						nn.BCELoss(p, y)
					}()
					if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, vram.ErrArgument) {
						t.Fatalf("got %v, want ok=%v or vram.ErrArgument", err, tc.ok)
					}
				})
			})
		}
	}
}
