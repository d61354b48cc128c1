package nn_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// refRows returns the rows of logits of shape [N, C, d...] (or [C]) as
// log-softmax vectors over C, in the order of the targets [N, d...].
func refRows(logits []float64, shape []int) [][]float64 {
	if len(shape) == 1 {
		shape = []int{1, shape[0]}
	}
	n, c := shape[0], shape[1]
	d := 1
	for _, s := range shape[2:] {
		d *= s
	}
	var rows [][]float64
	for i := range n {
		for k := range d {
			row := make([]float64, c)
			m := math.Inf(-1)
			for j := range c {
				row[j] = logits[(i*c+j)*d+k]
				m = math.Max(m, row[j])
			}
			s := 0.0
			for _, v := range row {
				s += math.Exp(v - m)
			}
			for j := range row {
				row[j] -= m + math.Log(s)
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// refClassLoss is PyTorch's cross_entropy of class indices, written out in
// float64: per-target losses and the mean's denominator.
func refClassLoss(rows [][]float64, targets []int64, w []float64, ignore int64, eps float64) (per []float64, den float64) {
	for i, row := range rows {
		c := len(row)
		wc := func(j int) float64 {
			if w == nil {
				return 1
			}
			return w[j]
		}
		if targets[i] == ignore {
			per = append(per, 0)
			continue
		}
		y := int(targets[i])
		nll := -wc(y) * row[y]
		smooth := 0.0
		for j := range row {
			smooth -= wc(j) * row[j]
		}
		per = append(per, (1-eps)*nll+eps/float64(c)*smooth)
		den += wc(y)
	}
	return per, den
}

// refSoftLoss is PyTorch's cross_entropy of class probabilities in
// float64: per-row losses.
func refSoftLoss(rows [][]float64, probs []float64, shape []int, w []float64, eps float64) []float64 {
	c := shape[min(1, len(shape)-1)]
	d := 1
	for _, s := range shape[min(2, len(shape)):] {
		d *= s
	}
	var per []float64
	for r, row := range rows {
		i, k := r/d, r%d
		l := 0.0
		for j := range row {
			q := probs[(i*c+j)*d+k]*(1-eps) + eps/float64(c)
			wj := 1.0
			if w != nil {
				wj = w[j]
			}
			l -= wj * q * row[j]
		}
		per = append(per, l)
	}
	return per
}

// reduceRef combines per-element losses as r says, the mean dividing by den.
func reduceRef(per []float64, den float64, r nn.Reduction) []float64 {
	if r == nn.ReductionNone {
		return per
	}
	s := 0.0
	for _, v := range per {
		s += v
	}
	if r == nn.ReductionSum {
		return []float64{s}
	}
	return []float64{s / den}
}

func intp(i int) *int { return &i }

// TestCrossEntropyOptions checks CrossEntropyLossWith and NLLLossWith
// against PyTorch's formulas in float64 for each option (class weights,
// any ignore index, label smoothing and its interaction with both,
// probabilities, extra dimensions, unbatched input, each reduction), and
// their gradients against central differences.
func TestCrossEntropyOptions(t *testing.T) {
	logits2 := []float64{0.5, -1.2, 2.0, 0.1, 3.0, -0.3, 0.7, 1.1, -2.0, 0.4, 0.0, 1.5}
	logits3 := []float64{0.3, -0.4, 1.2, 0.9, -1.1, 0.2, 2.2, 0.6, -0.7, 1.4, 0.05, -0.25}
	probs2 := []float64{0.1, 0.2, 0.3, 0.4, 1, 0, 0, 0, 0.25, 0.25, 0.25, 0.25}
	w4 := []float64{0.5, 2, 1, 3}
	w3 := []float64{2, 0.5, 1.5}
	tests := []struct {
		name     string
		logits   []float64
		shape    []int
		targets  []int64   // class indices, of the shape without C
		probs    []float64 // or probabilities, of shape
		weight   []float64
		ignore   *int
		eps      float64
		r        nn.Reduction
		nll      bool // NLLLossWith of the log-softmax
		allIgnor bool
	}{
		{name: "mean", logits: logits2, shape: []int{3, 4}, targets: []int64{1, 0, 3}},
		{name: "sum", logits: logits2, shape: []int{3, 4}, targets: []int64{1, 0, 3}, r: nn.ReductionSum},
		{name: "none", logits: logits2, shape: []int{3, 4}, targets: []int64{1, 0, 3}, r: nn.ReductionNone},
		{name: "weight mean", logits: logits2, shape: []int{3, 4}, targets: []int64{1, 0, 3}, weight: w4},
		{name: "weight ignored mean", logits: logits2, shape: []int{3, 4}, targets: []int64{1, -100, 3}, weight: w4},
		{name: "weight ignored none", logits: logits2, shape: []int{3, 4}, targets: []int64{1, -100, 3}, weight: w4, r: nn.ReductionNone},
		{name: "ignore class 0", logits: logits2, shape: []int{3, 4}, targets: []int64{1, 0, 3}, ignore: intp(0)},
		{name: "ignore class 3 weight sum", logits: logits2, shape: []int{3, 4}, targets: []int64{3, 0, 3}, ignore: intp(3), weight: w4, r: nn.ReductionSum},
		{name: "ignore -1", logits: logits2, shape: []int{3, 4}, targets: []int64{-1, 2, 3}, ignore: intp(-1)},
		{name: "smoothing", logits: logits2, shape: []int{3, 4}, targets: []int64{1, 0, 3}, eps: 0.1},
		{name: "smoothing ignored", logits: logits2, shape: []int{3, 4}, targets: []int64{1, -100, 3}, eps: 0.2},
		{name: "smoothing weight ignored", logits: logits2, shape: []int{3, 4}, targets: []int64{1, -100, 3}, eps: 0.3, weight: w4},
		{name: "smoothing weight none", logits: logits2, shape: []int{3, 4}, targets: []int64{1, 2, 3}, eps: 0.3, weight: w4, r: nn.ReductionNone},
		{name: "smoothing 1", logits: logits2, shape: []int{3, 4}, targets: []int64{1, 2, 3}, eps: 1},
		{name: "extra dims", logits: logits3, shape: []int{2, 3, 2}, targets: []int64{0, 2, 1, 1}},
		{name: "extra dims weight smoothing", logits: logits3, shape: []int{2, 3, 2}, targets: []int64{0, 2, -100, 1}, weight: w3, eps: 0.1},
		{name: "extra dims none", logits: logits3, shape: []int{2, 3, 2}, targets: []int64{0, 2, -100, 1}, r: nn.ReductionNone},
		{name: "unbatched", logits: logits2[:4], shape: []int{4}, targets: []int64{2}, weight: w4, eps: 0.1},
		{name: "probabilities", logits: logits2, shape: []int{3, 4}, probs: probs2},
		{name: "probabilities weight smoothing", logits: logits2, shape: []int{3, 4}, probs: probs2, weight: w4, eps: 0.2},
		{name: "probabilities sum", logits: logits2, shape: []int{3, 4}, probs: probs2, r: nn.ReductionSum},
		{name: "probabilities none extra dims", logits: logits3, shape: []int{2, 3, 2}, probs: logits3, weight: w3, r: nn.ReductionNone},
		{name: "nll weight ignored", logits: logits2, shape: []int{3, 4}, targets: []int64{1, -100, 3}, weight: w4, nll: true},
		{name: "nll ignore 2 none", logits: logits2, shape: []int{3, 4}, targets: []int64{1, 2, 3}, ignore: intp(2), nll: true, r: nn.ReductionNone},
		{name: "nll extra dims sum", logits: logits3, shape: []int{2, 3, 2}, targets: []int64{0, 2, 1, 1}, nll: true, r: nn.ReductionSum},
		{name: "all ignored mean is NaN", logits: logits2, shape: []int{3, 4}, targets: []int64{-100, -100, -100}, weight: w4, allIgnor: true},
		{name: "all ignored smoothing", logits: logits2, shape: []int{3, 4}, targets: []int64{-100, -100, -100}, eps: 0.1, allIgnor: true},
		{name: "all ignored extra dims", logits: logits3, shape: []int{2, 3, 2}, targets: []int64{1, 1, 1, 1}, ignore: intp(1), allIgnor: true},
		{name: "all ignored nll weight", logits: logits2, shape: []int{3, 4}, targets: []int64{-100, -100, -100}, weight: w4, nll: true, allIgnor: true},
		{name: "all ignored nll default", logits: logits2, shape: []int{3, 4}, targets: []int64{-100, -100, -100}, nll: true, allIgnor: true},
		{name: "all ignored default", logits: logits2, shape: []int{3, 4}, targets: []int64{-100, -100, -100}, allIgnor: true},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				before := vram.MemoryAllocated(dev)
				vram.Tidy(func() {
					rows := refRows(tc.logits, tc.shape)
					var want []float64
					ignore := int64(-100)
					if tc.ignore != nil {
						ignore = int64(*tc.ignore)
					}
					if tc.probs != nil {
						per := refSoftLoss(rows, tc.probs, tc.shape, tc.weight, tc.eps)
						want = reduceRef(per, float64(len(per)), tc.r)
					} else {
						per, den := refClassLoss(rows, tc.targets, tc.weight, ignore, tc.eps)
						want = reduceRef(per, den, tc.r)
					}
					var tgt, w *vram.Tensor
					if tc.probs != nil {
						tgt = vram.FromSlice(tc.probs, tc.shape, dev)
					} else {
						ts := tc.shape[:1]
						if len(tc.shape) == 1 {
							ts = vram.Shape{}
						} else {
							ts = append(ts[:1:1], tc.shape[2:]...)
						}
						tgt = vram.FromSlice(tc.targets, ts, dev)
					}
					if tc.weight != nil {
						w = vram.FromSlice(tc.weight, vram.Shape{len(tc.weight)}, dev)
					}
					loss := func(x *vram.Tensor) *vram.Tensor {
						if tc.nll {
							lsm := x.LogSoftmax(min(1, x.Dim()-1))
							defer lsm.Release()
							return nn.NLLLossWith(lsm, tgt, nn.NLLLossOptions{Weight: w, IgnoreIndex: tc.ignore, Reduction: tc.r})
						}
						return nn.CrossEntropyLossWith(x, tgt, nn.CrossEntropyOptions{Weight: w, IgnoreIndex: tc.ignore, LabelSmoothing: tc.eps, Reduction: tc.r})
					}
					x := vram.FromSlice(tc.logits, tc.shape, dev, vram.WithGrad())
					l := loss(x)
					got := l.Float64s()
					if tc.allIgnor {
						// PyTorch's value is NaN (0/0) and its gradient zeros.
						if len(got) != 1 || !math.IsNaN(got[0]) {
							t.Fatalf("loss %v, want NaN", got)
						}
						l.Backward()
						checkValues(t, "gradient", x.Grad().Float64s(), make([]float64, len(tc.logits)), 0)
						return
					}
					if tc.r == nn.ReductionNone {
						ws := tgt.Shape()
						if tc.probs != nil {
							ws = append(ws[:1:1], ws[2:]...)
						}
						if !slicesEqual(l.Shape(), ws) {
							t.Fatalf("shape %v, want %v", l.Shape(), ws)
						}
					}
					checkValues(t, "loss", got, want, 1e-12)
					// Gradient of the sum of the losses by central differences.
					total := func(x *vram.Tensor) float64 {
						s := 0.0
						for _, v := range loss(x).Float64s() {
							s += v
						}
						return s
					}
					l.Sum().Backward()
					g := x.Grad().Float64s()
					const h = 1e-6
					for i := range tc.logits {
						at := func(d float64) float64 {
							v := append([]float64(nil), tc.logits...)
							v[i] += d
							return total(vram.FromSlice(v, tc.shape, dev))
						}
						if fd := (at(h) - at(-h)) / (2 * h); math.Abs(fd-g[i]) > 1e-6 {
							t.Errorf("d/dx[%d] = %v, finite difference %v", i, g[i], fd)
						}
					}
				})
				// Only growth is a leak: other tests' tensors may be freed meanwhile.
				if after := vram.MemoryAllocated(dev); after > before {
					t.Errorf("%d bytes allocated after the loss, %d before", after, before)
				}
			})
		}
	}
}

func slicesEqual(a, b vram.Shape) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCrossEntropyOptionsDefaultsMatch checks that the zero options give
// CrossEntropyLoss and NLLLoss, and that bfloat16 logits give a bfloat16
// loss with options as without.
func TestCrossEntropyOptionsDefaultsMatch(t *testing.T) {
	vram.Tidy(func() {
		x := vram.FromSlice([]float64{1, 2, 3, 0, 0, 0, -1, 4, 2}, vram.Shape{3, 3})
		y := vram.FromSlice([]int64{2, -100, 1}, nil)
		want := nn.CrossEntropyLoss(x, y).Item()
		if got := nn.CrossEntropyLossWith(x, y, nn.CrossEntropyOptions{}).Item(); got != want {
			t.Errorf("zero options %v, CrossEntropyLoss %v", got, want)
		}
		if got := nn.NLLLossWith(x.LogSoftmax(1), y, nn.NLLLossOptions{}).Item(); got != want {
			t.Errorf("NLLLossWith zero options %v, CrossEntropyLoss %v", got, want)
		}
		// A weight of ones is the unweighted loss.
		ones := vram.Ones(vram.Shape{3}, vram.Float64)
		if got := nn.CrossEntropyLossWith(x, y, nn.CrossEntropyOptions{Weight: ones}).Item(); !near(got, want, 1e-15) {
			t.Errorf("weight of ones %v, want %v", got, want)
		}
		h := nn.CrossEntropyLossWith(x.Cast(vram.BFloat16), y, nn.CrossEntropyOptions{LabelSmoothing: 0.1, Reduction: nn.ReductionSum})
		if h.DType() != vram.BFloat16 {
			t.Errorf("bfloat16 logits give %s, want bfloat16", h.DType())
		}
	})
}

// TestClassLossArguments checks that bad arguments to the class losses
// are refused with the package's errors.
func TestClassLossArguments(t *testing.T) {
	vram.Tidy(func() {
		x := vram.Zeros(vram.Shape{3, 4})
		y := vram.FromSlice([]int64{0, 1, 2}, nil)
		p := vram.Zeros(vram.Shape{3, 4})
		tests := []struct {
			name string
			fn   func()
			kind error
		}{
			{"target out of range", func() {
				nn.CrossEntropyLossWith(x, vram.FromSlice([]int64{0, 4, 1}, nil), nn.CrossEntropyOptions{Reduction: nn.ReductionSum})
			}, vram.ErrIndex},
			{"negative target not ignored", func() {
				nn.NLLLossWith(x, vram.FromSlice([]int64{0, -1, 1}, nil), nn.NLLLossOptions{IgnoreIndex: intp(2)})
			}, vram.ErrIndex},
			{"weight size", func() { nn.CrossEntropyLossWith(x, y, nn.CrossEntropyOptions{Weight: vram.Ones(vram.Shape{3})}) }, vram.ErrShape},
			{"weight rank", func() { nn.NLLLossWith(x, y, nn.NLLLossOptions{Weight: vram.Ones(vram.Shape{1, 4})}) }, vram.ErrShape},
			{"smoothing above 1", func() { nn.CrossEntropyLossWith(x, y, nn.CrossEntropyOptions{LabelSmoothing: 1.5}) }, vram.ErrArgument},
			{"smoothing NaN", func() { nn.CrossEntropyLossWith(x, y, nn.CrossEntropyOptions{LabelSmoothing: math.NaN()}) }, vram.ErrArgument},
			{"unknown reduction", func() { nn.CrossEntropyLossWith(x, y, nn.CrossEntropyOptions{Reduction: 7}) }, vram.ErrArgument},
			{"target shape", func() {
				nn.CrossEntropyLossWith(x, vram.FromSlice([]int64{0, 1}, nil), nn.CrossEntropyOptions{Reduction: nn.ReductionSum})
			}, vram.ErrShape},
			{"extra dims target shape", func() {
				nn.CrossEntropyLossWith(vram.Zeros(vram.Shape{2, 3, 4}), vram.Zeros(vram.Shape{2, 3}, vram.Int64), nn.CrossEntropyOptions{Reduction: nn.ReductionSum})
			}, vram.ErrShape},
			{"scalar input", func() {
				nn.NLLLossWith(vram.Scalar(1), vram.Scalar(0, vram.Int64), nn.NLLLossOptions{Reduction: nn.ReductionSum})
			}, vram.ErrShape},
			{"bool targets", func() { nn.CrossEntropyLossWith(x, y.EqScalar(0), nn.CrossEntropyOptions{Reduction: nn.ReductionSum}) }, vram.ErrDType},
			{"probabilities shape", func() { nn.CrossEntropyLossWith(x, vram.Zeros(vram.Shape{3, 3}), nn.CrossEntropyOptions{}) }, vram.ErrShape},
			{"probabilities ignore index", func() { nn.CrossEntropyLossWith(x, p, nn.CrossEntropyOptions{IgnoreIndex: intp(0)}) }, vram.ErrArgument},
			{"nil targets", func() { nn.CrossEntropyLossWith(x, nil, nn.CrossEntropyOptions{}) }, vram.ErrArgument},
			{"weight on another device", func() {
				nn.CrossEntropyLossWith(x.To(vram.Sim(0)), y.To(vram.Sim(0)), nn.CrossEntropyOptions{Weight: vram.Ones(vram.Shape{4})})
			}, vram.ErrDevice},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				err := vram.Catch(func() { vram.Tidy(tc.fn) })
				if !errors.Is(err, tc.kind) {
					t.Fatalf("error %v, want %v", err, tc.kind)
				}
				if msg := err.Error(); !strings.Contains(msg, "cross_entropy") && !strings.Contains(msg, "nll_loss") {
					t.Errorf("error %q does not name the loss", msg)
				}
			})
		}
	})
}
