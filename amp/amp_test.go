package amp_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

func TestMain(m *testing.M) {
	if err := vram.Configure(vram.Config{SimDevices: []int64{256 << 20}}); err != nil {
		panic(err)
	}
	if vram.CUDAAvailable() {
		devices = append(devices, vram.CUDA(0))
	}
	os.Exit(m.Run())
}

// devices are where the tests run: the CPU, a simulated GPU and the first
// CUDA GPU when there is one.
var devices = []vram.Device{vram.CPU, vram.Sim(0)}

func TestAutocastOpDTypes(t *testing.T) {
	for _, d := range devices {
		for _, low := range []vram.DType{vram.Float16, vram.BFloat16} {
			x := vram.Randn(vram.Shape{4, 3}, d)
			w := vram.Randn(vram.Shape{2, 3}, d).SetRequiresGrad(true)
			b := vram.Randn(vram.Shape{2, 3, 3}, d)
			h := vram.Randn(vram.Shape{4, 3}, low, d)
			seq := vram.Randn(vram.Shape{2, 5, 4}, d)
			img := vram.Randn(vram.Shape{1, 2, 4, 4}, d)
			k1 := vram.Randn(vram.Shape{3, 5, 3}, d).SetRequiresGrad(true)
			k2 := vram.Randn(vram.Shape{2, 2, 3, 3}, d).SetRequiresGrad(true)
			classes := vram.FromSlice([]int64{0, 1, 2, 0}, vram.Shape{4}, d)
			mha := nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{BatchFirst: true}, d)
			gru := nn.NewGRU(4, 3, nn.RecurrentOptions{BatchFirst: true}, d)
			gn := nn.NewGroupNorm(1, 3, 1e-5, d)
			prelu := nn.NewPReLU(1, 0.25, d)
			logSigmoid := nn.NewLogSigmoid()
			emb := nn.NewEmbeddingOptions(3, 2, nn.EmbeddingOptions{ScaleGradByFreq: true}, d, low)
			v := vram.Randn(vram.Shape{5}, d)
			hv := vram.Randn(vram.Shape{5}, low, d)
			tests := []struct {
				name string
				f    func() *vram.Tensor
				want vram.DType
			}{
				{"matmul", func() *vram.Tensor { return x.MatMul(w.MT()) }, low},
				{"linear", func() *vram.Tensor { return vram.Linear(x, w, nil) }, low},
				{"linear relu", func() *vram.Tensor { return vram.LinearAct(x, w, nil, vram.ActReLU) }, low},
				{"bmm", func() *vram.Tensor { return b.BMM(b) }, low},
				{"softmax", func() *vram.Tensor { return h.Softmax(1) }, vram.Float32},
				{"log_softmax", func() *vram.Tensor { return h.LogSoftmax(1) }, vram.Float32},
				{"exp", func() *vram.Tensor { return h.Exp() }, vram.Float32},
				{"log", func() *vram.Tensor { return h.Abs().Log() }, vram.Float32},
				{"pow", func() *vram.Tensor { return h.PowScalar(2) }, vram.Float32},
				{"sum", func() *vram.Tensor { return h.Sum() }, vram.Float32},
				{"prod", func() *vram.Tensor { return h.Prod(1) }, vram.Float32},
				{"cumsum", func() *vram.Tensor { return h.CumSum(0) }, vram.Float32},
				{"cumprod", func() *vram.Tensor { return h.CumProd(-1) }, vram.Float32},
				{"norm", func() *vram.Tensor { return h.Norm(2, nil, false) }, vram.Float32},
				{"mean accumulates in float32 but keeps its dtype", func() *vram.Tensor { return h.Mean(0) }, low},
				{"mse_loss", func() *vram.Tensor { return vram.MSELoss(h, h) }, vram.Float32},
				{"log1p", func() *vram.Tensor { return h.Abs().Log1p() }, vram.Float32},
				{"expm1", func() *vram.Tensor { return h.Expm1() }, vram.Float32},
				{"rsqrt", func() *vram.Tensor { return h.Abs().Rsqrt() }, vram.Float32},
				{"reciprocal", func() *vram.Tensor { return h.Reciprocal() }, vram.Float32},
				{"softplus", func() *vram.Tensor { return h.Softplus(1, 20) }, vram.Float32},
				{"cosine_similarity", func() *vram.Tensor { return nn.CosineSimilarity(h, h, 1, 1e-8) }, vram.Float32},
				{"l1_loss", func() *vram.Tensor { return nn.L1Loss(h, h) }, vram.Float32},
				{"layer_norm", func() *vram.Tensor { return vram.LayerNorm(h, []int{3}, nil, nil, 1e-5) }, vram.Float32},
				{"conv1d", func() *vram.Tensor { return vram.Conv1d(seq, k1, nil, vram.Conv1dParams{}) }, low},
				{"conv2d", func() *vram.Tensor { return vram.Conv2d(img, k2, nil, vram.Conv2dParams{}) }, low},
				{"conv_transpose2d", func() *vram.Tensor { return vram.ConvTranspose2d(img, k2, nil, vram.Conv2dParams{}) }, low},
				{"scaled_dot_product_attention", func() *vram.Tensor {
					return vram.ScaledDotProductAttention(seq, seq, seq, vram.AttentionOptions{})
				}, low},
				{"multihead_attention", func() *vram.Tensor { return mha.Forward(seq) }, low},
				{"gru", func() *vram.Tensor { return gru.Forward(seq) }, low},
				{"log10", func() *vram.Tensor { return h.Abs().Log10() }, vram.Float32},
				{"log2", func() *vram.Tensor { return h.Abs().Log2() }, vram.Float32},
				{"sinh", func() *vram.Tensor { return h.Sinh() }, vram.Float32},
				{"cosh", func() *vram.Tensor { return h.Cosh() }, vram.Float32},
				{"tan", func() *vram.Tensor { return h.Tan() }, vram.Float32},
				{"asin", func() *vram.Tensor { return h.Sigmoid().Asin() }, vram.Float32},
				{"acos", func() *vram.Tensor { return h.Sigmoid().Acos() }, vram.Float32},
				{"logsumexp", func() *vram.Tensor { return h.Logsumexp([]int{1}, false) }, vram.Float32},
				{"cdist", func() *vram.Tensor { return vram.Cdist(h, h, 2) }, vram.Float32},
				{"cross_entropy", func() *vram.Tensor { return vram.CrossEntropy(h, classes) }, vram.Float32},
				{"group_norm", func() *vram.Tensor { return gn.Forward(h) }, vram.Float32},
				{"other ops keep their dtype: atan", func() *vram.Tensor { return h.Atan() }, low},
				{"prelu", func() *vram.Tensor { return prelu.Forward(x) }, low},
				{"rdiv (reciprocal times the scalar)", func() *vram.Tensor { return h.RDivScalar(2) }, vram.Float32},
				{"dot promotes mixed operands", func() *vram.Tensor { return hv.Dot(v) }, vram.Float32},
				{"other ops keep their dtype: dot of 16-bit vectors", func() *vram.Tensor { return hv.Dot(hv) }, low},
				{"other ops keep their dtype: log_sigmoid", func() *vram.Tensor { return logSigmoid.Forward(h) }, low},
				{"other ops keep their dtype: embedding scaling gradients by frequency", func() *vram.Tensor { return emb.Forward(classes) }, low},
				{"other ops keep their dtype", func() *vram.Tensor { return h.Relu() }, low},
			}
			for _, tc := range tests {
				var got vram.DType
				amp.Autocast(low, func() {
					if dt, ok := amp.Enabled(); !ok || dt != low {
						t.Fatalf("Enabled() = %v, %v inside Autocast(%v)", dt, ok, low)
					}
					r := tc.f()
					got = r.DType()
					r.Release()
				})
				if got != tc.want {
					t.Errorf("%v %v %s: dtype %v, want %v", d, low, tc.name, got, tc.want)
				}
				if strings.Contains(tc.name, "mixed") {
					continue // outside the region the op refuses mixed dtypes
				}
				// Outside the region every op keeps its input's dtype.
				r := tc.f()
				if tc.want == low && r.DType() != vram.Float32 && !strings.HasPrefix(tc.name, "other") && !strings.HasPrefix(tc.name, "mean") {
					t.Errorf("%v %s outside Autocast: dtype %v, want float32", d, tc.name, r.DType())
				}
				r.Release()
			}
			for _, x := range []*vram.Tensor{x, w, b, h, seq, img, k1, k2, classes, v, hv} {
				x.Release()
			}
			for _, m := range []nn.Module{mha, gru, gn, prelu, emb} {
				nn.Release(m)
			}
		}
	}
	if _, ok := amp.Enabled(); ok {
		t.Fatal("Enabled() outside any region")
	}
}

func TestAutocastGradientsReachFloat32Master(t *testing.T) {
	for _, d := range devices {
		lin := nn.NewLinear(8, 4, d)
		x := vram.Randn(vram.Shape{16, 8}, d)
		y := vram.Randn(vram.Shape{16, 4}, d)
		// The float32 reference gradient.
		loss := nn.MSELoss(lin.Forward(x), y)
		loss.Backward()
		want := lin.Weight.Grad().Float32s()
		loss.Release()
		lin.Weight.SetGrad(nil)
		lin.Bias.SetGrad(nil)

		amp.Autocast(vram.BFloat16, func() {
			out := lin.Forward(x)
			if out.DType() != vram.BFloat16 {
				t.Fatalf("%v: output %v, want bfloat16", d, out.DType())
			}
			loss = nn.MSELoss(out, y)
			out.Release()
		})
		if loss.DType() != vram.Float32 {
			t.Fatalf("%v: loss %v, want float32", d, loss.DType())
		}
		loss.Backward()
		loss.Release()
		g := lin.Weight.Grad()
		if g.DType() != vram.Float32 || lin.Weight.DType() != vram.Float32 {
			t.Fatalf("%v: weight %v with grad %v, want float32 for both", d, lin.Weight.DType(), g.DType())
		}
		for i, v := range g.Float32s() {
			if math.Abs(float64(v-want[i])) > 0.05*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%v: grad[%d] = %v, float32 reference %v", d, i, v, want[i])
			}
		}
		nn.Release(lin)
		x.Release()
		y.Release()
	}
}

func TestAutocastIsGoroutineScoped(t *testing.T) {
	a := vram.Randn(vram.Shape{2, 2})
	defer a.Release()
	amp.Autocast(vram.Float16, func() {
		var wg sync.WaitGroup
		var other vram.DType
		wg.Go(func() {
			r := a.MatMul(a)
			other = r.DType()
			r.Release()
		})
		wg.Wait()
		if other != vram.Float32 {
			t.Errorf("a goroutine started inside Autocast got %v, want float32", other)
		}
		amp.Autocast(vram.BFloat16, func() {
			r := a.MatMul(a)
			if r.DType() != vram.BFloat16 {
				t.Errorf("nested region: %v, want bfloat16", r.DType())
			}
			r.Release()
		})
		r := a.MatMul(a)
		if r.DType() != vram.Float16 {
			t.Errorf("after the nested region: %v, want float16", r.DType())
		}
		r.Release()
	})
}

// TestAutocastRefusesBCELoss follows PyTorch, whose autocast refuses
// binary_cross_entropy whatever the dtypes and points to the logits form;
// outside a region, and under NoAutocast inside one, it runs.
func TestAutocastRefusesBCELoss(t *testing.T) {
	for _, d := range devices {
		for _, dt := range []vram.DType{vram.Float32, vram.Float16, vram.BFloat16, vram.Float64} {
			p := vram.Rand(vram.Shape{4}, d).Cast(dt)
			y := vram.Rand(vram.Shape{4}, d).Cast(dt)
			tests := []struct {
				name   string
				region func(fn func())
				refuse bool
			}{
				{"outside", func(fn func()) { fn() }, false},
				{"float16 region", func(fn func()) { amp.Autocast(vram.Float16, fn) }, true},
				{"bfloat16 region", func(fn func()) { amp.Autocast(vram.BFloat16, fn) }, true},
				{"NoAutocast inside a region", func(fn func()) { amp.Autocast(vram.Float16, func() { amp.NoAutocast(fn) }) }, false},
			}
			for _, tc := range tests {
				var r any
				tc.region(func() {
					defer func() { r = recover() }()
					nn.BCELoss(p, y).Release()
				})
				var e *vram.Error
				switch err, _ := r.(error); {
				case !tc.refuse && r != nil:
					t.Errorf("%v %v %s: panic %v", d, dt, tc.name, r)
				case tc.refuse && (!errors.As(err, &e) || e.Kind != vram.ErrArgument || !strings.Contains(e.Detail, "BCEWithLogitsLoss")):
					t.Errorf("%v %v %s: panic %v, want vram.ErrArgument pointing to BCEWithLogitsLoss", d, dt, tc.name, r)
				}
			}
			p.Release()
			y.Release()
		}
	}
}

func TestAutocastRejectsDTypes(t *testing.T) {
	for _, dt := range []vram.DType{vram.Float32, vram.Float64, vram.Int32, vram.Bool} {
		func() {
			defer func() {
				var e *vram.Error
				r := recover()
				if err, ok := r.(error); !ok || !errors.As(err, &e) || e.Kind != vram.ErrDType {
					t.Errorf("Autocast(%v): panic %v, want vram.ErrDType", dt, r)
				}
			}()
			amp.Autocast(dt, func() { t.Errorf("Autocast(%v) ran fn", dt) })
		}()
	}
}

func TestGradScalerDefaults(t *testing.T) {
	s, err := amp.NewGradScaler(amp.GradScalerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := amp.GradScalerState{Scale: 65536, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000}
	if s.State() != want {
		t.Fatalf("state %+v, want %+v", s.State(), want)
	}
	for _, cfg := range []amp.GradScalerConfig{
		{InitScale: -1}, {InitScale: math.Inf(1)}, {InitScale: math.NaN()},
		{GrowthFactor: 1}, {GrowthFactor: 0.5}, {BackoffFactor: 1}, {BackoffFactor: -0.5},
		{GrowthInterval: -3},
	} {
		if _, err := amp.NewGradScaler(cfg); err == nil {
			t.Errorf("NewGradScaler(%+v) accepted", cfg)
		}
	}
}

// halfParam returns a float16 parameter [4] of ones on d with an SGD.
func halfParam(t *testing.T, d vram.Device) (*vram.Tensor, optim.Optimizer) {
	p := vram.Ones(vram.Shape{4}, vram.Float16, d).SetRequiresGrad(true)
	opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	return p, opt
}

func TestGradScalerSkipsFloat16Overflow(t *testing.T) {
	for _, d := range devices {
		p, opt := halfParam(t, d)
		s, _ := amp.NewGradScaler(amp.GradScalerConfig{})
		// loss = sum(p·x) with x = 2: the scaled gradient 2·65536 is past
		// float16's 65504 and becomes inf.
		x := vram.Full(vram.Shape{4}, 2, vram.Float16, d)
		loss := p.Mul(x).Sum()
		scaled := s.Scale(loss)
		scaled.Backward()
		if g := p.Grad().Float32s(); !math.IsInf(float64(g[0]), 1) {
			t.Fatalf("%v: scaled float16 gradient %v, want +Inf (overflow on purpose)", d, g[0])
		}
		if s.Step(opt, []*vram.Tensor{p}) {
			t.Errorf("%v: Step ran the optimizer on inf gradients", d)
		}
		if v := p.Float32s(); v[0] != 1 {
			t.Errorf("%v: parameter %v after a skipped step, want 1", d, v[0])
		}
		s.Update()
		if s.CurrentScale() != 32768 {
			t.Errorf("%v: scale %v after overflow, want 32768", d, s.CurrentScale())
		}
		opt.ZeroGrad()
		loss.Release()
		scaled.Release()

		// At 2^15 the scaled gradient is 65536: still past 65504. At 2^14
		// it fits, and the step runs with the true gradient 2.
		steps := 0
		for range 3 {
			loss = p.Mul(x).Sum()
			scaled = s.Scale(loss)
			scaled.Backward()
			if s.Step(opt, []*vram.Tensor{p}) {
				steps++
			}
			s.Update()
			opt.ZeroGrad()
			loss.Release()
			scaled.Release()
			if steps > 0 {
				break
			}
		}
		if steps != 1 || s.CurrentScale() != 16384 {
			t.Fatalf("%v: %d steps, scale %v; want one step at scale 16384", d, steps, s.CurrentScale())
		}
		if v := p.Float32s(); math.Abs(float64(v[0])-0.8) > 1e-3 {
			t.Errorf("%v: parameter %v, want 1 - 0.1·2 = 0.8", d, v[0])
		}
		p.Release()
		x.Release()
	}
}

func TestGradScalerNaNAndUnscale(t *testing.T) {
	p, opt := halfParam(t, vram.CPU)
	defer p.Release()
	s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4})
	p.SetGrad(vram.FromSlice([]float32{4, 8, float32(math.NaN()), 0}, vram.Shape{4}, vram.Float16))
	found, err := s.Unscale([]*vram.Tensor{p})
	if err != nil || !found {
		t.Fatalf("Unscale = %v, %v; want found NaN", found, err)
	}
	if _, err := s.Unscale([]*vram.Tensor{p}); !errors.Is(err, amp.ErrUnscaledTwice) {
		t.Fatalf("second Unscale: %v, want ErrUnscaledTwice", err)
	}
	if g := p.Grad().Float32s(); g[0] != 1 || g[1] != 2 {
		t.Fatalf("unscaled gradient %v, want [1 2 NaN 0] (unscaled once)", g)
	}
	if s.Step(opt, []*vram.Tensor{p}) {
		t.Fatal("Step ran on a NaN gradient")
	}
	s.Update()
	if s.CurrentScale() != 2 {
		t.Fatalf("scale %v, want 2", s.CurrentScale())
	}
	// A clean Unscale before Step (as for clipping): Step does not
	// divide again.
	p.SetGrad(vram.FromSlice([]float32{2, 2, 2, 2}, vram.Shape{4}, vram.Float16))
	if found, err := s.Unscale([]*vram.Tensor{p}); found || err != nil {
		t.Fatalf("Unscale = %v, %v on finite gradients", found, err)
	}
	if !s.Step(opt, []*vram.Tensor{p}) {
		t.Fatal("Step skipped on finite gradients")
	}
	if v := p.Float32s(); math.Abs(float64(v[0])-0.9) > 1e-3 {
		t.Fatalf("parameter %v, want 1 - 0.1·1 = 0.9", v[0])
	}
}

func TestGradScalerGrowthAndState(t *testing.T) {
	s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 8, GrowthInterval: 3})
	var scales []float64
	for range 7 {
		s.Update() // clean steps
		scales = append(scales, s.CurrentScale())
	}
	want := []float64{8, 8, 16, 16, 16, 32, 32}
	for i := range want {
		if scales[i] != want[i] {
			t.Fatalf("scales %v, want %v", scales, want)
		}
	}
	st := s.State()
	blob, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back amp.GradScalerState
	if err := json.Unmarshal(blob, &back); err != nil {
		t.Fatal(err)
	}
	fresh, _ := amp.NewGradScaler(amp.GradScalerConfig{})
	if err := fresh.LoadState(back); err != nil {
		t.Fatal(err)
	}
	if fresh.State() != st {
		t.Fatalf("loaded %+v, want %+v", fresh.State(), st)
	}
	fresh.Update() // the loaded tracker is 1: growth on the second clean step
	if fresh.CurrentScale() != 32 {
		t.Fatalf("scale %v one step after loading, want 32", fresh.CurrentScale())
	}
	fresh.Update()
	if fresh.CurrentScale() != 64 {
		t.Fatalf("scale %v two steps after loading, want 64", fresh.CurrentScale())
	}
	for _, bad := range []amp.GradScalerState{
		{Scale: 0, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3},
		{Scale: 1, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3, GrowthTracker: 3},
		{Scale: 1, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 0},
	} {
		before := fresh.State()
		if err := fresh.LoadState(bad); err == nil {
			t.Errorf("LoadState(%+v) accepted", bad)
		}
		if fresh.State() != before {
			t.Errorf("a rejected LoadState changed the state")
		}
	}
}

func TestAutocastConcurrentRegions(t *testing.T) {
	w := vram.Randn(vram.Shape{8, 8}, vram.Sim(0)).SetRequiresGrad(true)
	defer w.Release()
	x := vram.Randn(vram.Shape{4, 8}, vram.Sim(0))
	defer x.Release()
	dts := []vram.DType{vram.Float16, vram.BFloat16, vram.Float32}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 12 {
		dt := dts[i%len(dts)]
		wg.Go(func() {
			for range 20 {
				run := func() {
					r := vram.Linear(x, w, nil)
					if r.DType() != dt {
						errs <- "got " + r.DType().String() + ", want " + dt.String()
					}
					r.Release()
				}
				if dt == vram.Float32 {
					run()
				} else {
					amp.Autocast(dt, run)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestGradScalerUnscaleTable unscales float32, float16 and bfloat16
// gradients on every device, through the fused kernel (contiguous
// gradients) and the composed ops (a transposed gradient), with inf, -inf
// and NaN placed in one or the other, and checks the flag and the values.
func TestGradScalerUnscaleTable(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	for _, d := range devices {
		for _, dt := range []vram.DType{vram.Float32, vram.Float16, vram.BFloat16} {
			for _, c := range []struct {
				name      string
				fused     []float32 // a contiguous [2, 3] gradient
				strided   []float32 // the transpose of a [3, 2] one
				wantFound bool
			}{
				{"finite", []float32{8, -16, 0, 2, 4, 6}, []float32{1, 2, 3, 4, 5, 6}, false},
				{"inf fused", []float32{8, inf, 0, 2, 4, 6}, []float32{1, 2, 3, 4, 5, 6}, true},
				{"-inf fused", []float32{8, 2, 0, 2, 4, -inf}, []float32{1, 2, 3, 4, 5, 6}, true},
				{"nan fused", []float32{nan, 2, 0, 2, 4, 6}, []float32{1, 2, 3, 4, 5, 6}, true},
				{"inf composed", []float32{8, 2, 0, 2, 4, 6}, []float32{1, 2, inf, 4, 5, 6}, true},
				{"nan composed", []float32{8, 2, 0, 2, 4, 6}, []float32{1, 2, 3, 4, 5, nan}, true},
			} {
				name := d.String() + "/" + dt.String() + "/" + c.name
				a := vram.Zeros(vram.Shape{2, 3}, dt, d).SetRequiresGrad(true)
				b := vram.Zeros(vram.Shape{2, 3}, dt, d).SetRequiresGrad(true)
				noGrad := vram.Zeros(vram.Shape{2}, dt, d).SetRequiresGrad(true)
				a.SetGrad(vram.FromSlice(c.fused, vram.Shape{2, 3}, dt, d))
				bt := vram.FromSlice(c.strided, vram.Shape{3, 2}, dt, d)
				b.SetGrad(bt.T())
				bt.Release()
				if b.Grad().IsContiguous() {
					t.Fatalf("%s: the transposed gradient is contiguous", name)
				}
				va, vb := a.Grad().Version(), b.Grad().Version()
				s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 2})
				found, err := s.Unscale([]*vram.Tensor{a, noGrad, b})
				if err != nil || found != c.wantFound {
					t.Errorf("%s: Unscale = %v, %v; want %v", name, found, err, c.wantFound)
				}
				// Both paths count their in-place write, as PyTorch's
				// unscale (an in-place op) does.
				if a.Grad().Version() != va+1 || b.Grad().Version() != vb+1 {
					t.Errorf("%s: gradient versions %d→%d (fused) and %d→%d (composed), want one write each",
						name, va, a.Grad().Version(), vb, b.Grad().Version())
				}
				check := func(what string, g *vram.Tensor, want []float32) {
					got := g.Contiguous().Float32s()
					for i, w := range want {
						w /= 2
						if !(got[i] == w || math.IsNaN(float64(got[i])) && math.IsNaN(float64(w))) {
							t.Errorf("%s: %s gradient %v, want %v halved", name, what, got, want)
							return
						}
					}
				}
				check("fused", a.Grad(), c.fused)
				// b's gradient is the transpose of the [3, 2] values.
				st := c.strided
				check("composed", b.Grad(), []float32{st[0], st[2], st[4], st[1], st[3], st[5]})
				for _, p := range []*vram.Tensor{a, b, noGrad} {
					p.Release()
				}
			}
		}
	}
}

// TestGradScalerUnscaleManyGradients unscales more gradients than one CUDA
// launch takes (28), of mixed dtypes, with a NaN only in the last one.
func TestGradScalerUnscaleManyGradients(t *testing.T) {
	for _, d := range devices {
		var ps []*vram.Tensor
		dts := []vram.DType{vram.Float32, vram.Float16, vram.BFloat16}
		for i := range 40 {
			p := vram.Zeros(vram.Shape{i + 1}, dts[i%3], d).SetRequiresGrad(true)
			g := vram.Full(vram.Shape{i + 1}, 6, dts[i%3], d)
			if i == 39 {
				g.Release()
				vals := make([]float32, i+1)
				vals[i] = float32(math.NaN())
				g = vram.FromSlice(vals, vram.Shape{i + 1}, dts[i%3], d)
			}
			p.SetGrad(g)
			ps = append(ps, p)
		}
		s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4})
		if found, err := s.Unscale(ps[:39]); found || err != nil {
			t.Errorf("%v: Unscale of 39 finite gradients = %v, %v", d, found, err)
		}
		if g := ps[30].Grad().Float32s(); g[0] != 1.5 {
			t.Errorf("%v: gradient 30 unscaled to %v, want 1.5", d, g[0])
		}
		s.Update()
		if found, err := s.Unscale(ps); !found || err != nil {
			t.Errorf("%v: Unscale with a NaN in gradient 39 = %v, %v; want found", d, found, err)
		}
		for _, p := range ps {
			p.Release()
		}
	}
}

// TestGradScalerUnscaleConcurrent runs scalers of their own on several
// goroutines at once over the same device, each over its own parameters
// (a GradScaler itself is not shared), half of them with an inf gradient.
func TestGradScalerUnscaleConcurrent(t *testing.T) {
	for _, d := range devices {
		var wg sync.WaitGroup
		errs := make(chan string, 64)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 20 {
					p := vram.Zeros(vram.Shape{64}, d).SetRequiresGrad(true)
					g := vram.Full(vram.Shape{64}, 3, d)
					bad := (w+i)%2 == 0
					if bad {
						vals := make([]float32, 64)
						vals[i] = float32(math.Inf(-1))
						g.Release()
						g = vram.FromSlice(vals, vram.Shape{64}, d)
					}
					p.SetGrad(g)
					s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 2})
					found, err := s.Unscale([]*vram.Tensor{p})
					if err != nil || found != bad {
						errs <- fmt.Sprintf("%v: worker %d step %d: Unscale = %v, %v; want %v", d, w, i, found, err, bad)
					}
					if !bad {
						if v := p.Grad().Float32s()[0]; v != 1.5 {
							errs <- fmt.Sprintf("%v: worker %d step %d: gradient %v, want 1.5", d, w, i, v)
						}
					}
					p.Release()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
}

func TestGradScalerScalePromotes16BitLoss(t *testing.T) {
	s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 1 << 15})
	tests := []struct {
		dt, want vram.DType
	}{
		{vram.Float16, vram.Float32},
		{vram.BFloat16, vram.Float32},
		{vram.Float32, vram.Float32},
		{vram.Float64, vram.Float64},
	}
	for _, tt := range tests {
		for _, d := range devices {
			// 3·2^15 is past float16's 65504: a float16 scaled loss
			// would be inf and every step skipped.
			p := vram.Full(vram.Shape{}, 3, tt.dt, d).SetRequiresGrad(true)
			scaled := s.Scale(p.MulScalar(1))
			if scaled.DType() != tt.want || scaled.Item() != 3<<15 {
				t.Errorf("%v %v: Scale = %v %v, want %v %v", d, tt.dt, scaled.DType(), scaled.Item(), tt.want, 3<<15)
			}
			scaled.Backward()
			if g := p.Grad(); g == nil || g.DType() != tt.dt || g.Item() != 1<<15 {
				t.Errorf("%v %v: gradient %v, want 2^15 in %v", d, tt.dt, g, tt.dt)
			}
			scaled.Release()
			p.Release()
		}
	}
	if err := vram.Catch(func() { s.Scale(nil) }); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("Scale(nil): %v, want ErrArgument", err)
	}
}

// TestGradScalerScalePromotesIntegerLoss: a loss of an integer or bool
// dtype is scaled in float32, as PyTorch's float32 scale promotes it,
// rather than in its own dtype, where the product wraps around.
func TestGradScalerScalePromotesIntegerLoss(t *testing.T) {
	s, _ := amp.NewGradScaler(amp.GradScalerConfig{}) // 2^16
	tests := []struct {
		dt   vram.DType
		loss float64
	}{
		{vram.Int32, 40000}, // 40000·2^16 is past int32's range
		{vram.Int64, 3},
		{vram.Int8, 100},
		{vram.Bool, 1},
	}
	for _, tt := range tests {
		for _, d := range devices {
			l := vram.Full(vram.Shape{}, tt.loss, tt.dt, d)
			scaled := s.Scale(l)
			if scaled.DType() != vram.Float32 || scaled.Item() != tt.loss*65536 {
				t.Errorf("%v %v: Scale(%v) = %v %v, want float32 %v", d, tt.dt, tt.loss, scaled.DType(), scaled.Item(), tt.loss*65536)
			}
			scaled.Release()
			l.Release()
		}
	}
}

func TestGradScalerScaleStaysInFloat32Range(t *testing.T) {
	tests := []struct {
		name    string
		cfg     amp.GradScalerConfig
		updates int
		want    float64
	}{
		{"growth stops below float32 max", amp.GradScalerConfig{InitScale: 1 << 60, GrowthFactor: 1 << 30, GrowthInterval: 1}, 3, 0x1p120},
		{"growth to exactly float32 max", amp.GradScalerConfig{InitScale: math.MaxFloat32 / 2, GrowthInterval: 1}, 2, math.MaxFloat32},
		{"huge factor never overflows", amp.GradScalerConfig{InitScale: 1, GrowthFactor: 1e300, GrowthInterval: 1}, 5, 1},
	}
	for _, tt := range tests {
		s, err := amp.NewGradScaler(tt.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		for range tt.updates {
			s.Update()
		}
		if got := s.CurrentScale(); got != tt.want {
			t.Errorf("%s: scale %v, want %v", tt.name, got, tt.want)
		}
		if err := s.LoadState(s.State()); err != nil {
			t.Errorf("%s: LoadState(State()): %v", tt.name, err)
		}
	}
	for _, scale := range []float64{math.MaxFloat32 * 2, 1e300} {
		if _, err := amp.NewGradScaler(amp.GradScalerConfig{InitScale: scale}); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("InitScale %g: %v, want ErrArgument", scale, err)
		}
	}
}

func TestGradScalerBackoffKeepsLoadableState(t *testing.T) {
	p, opt := halfParam(t, vram.CPU)
	defer p.Release()
	s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 1, BackoffFactor: 1e-300})
	for range 3 {
		p.SetGrad(vram.FromSlice([]float32{float32(math.NaN()), 0, 0, 0}, vram.Shape{4}, vram.Float16))
		if s.Step(opt, []*vram.Tensor{p}) {
			t.Fatal("Step ran on a NaN gradient")
		}
		s.Update()
	}
	if !(s.CurrentScale() > 0) {
		t.Fatalf("scale %v after backing off, want positive", s.CurrentScale())
	}
	if err := s.LoadState(s.State()); err != nil {
		t.Fatalf("LoadState(State()): %v", err)
	}
}

func TestGradScalerStepTwiceBeforeUpdate(t *testing.T) {
	tests := []struct {
		name string
		grad float32
		want float32 // the parameter after the first Step
	}{
		{"finite gradients", 1, 0.9},
		{"inf gradients", float32(math.Inf(1)), 1},
	}
	for _, tt := range tests {
		p, opt := halfParam(t, vram.CPU)
		s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 1})
		p.SetGrad(vram.Full(vram.Shape{4}, float64(tt.grad), vram.Float16))
		s.Step(opt, []*vram.Tensor{p})
		err := vram.Catch(func() { s.Step(opt, []*vram.Tensor{p}) })
		if !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%s: second Step: %v, want ErrArgument", tt.name, err)
		}
		if v := p.Float32s()[0]; math.Abs(float64(v-tt.want)) > 1e-3 {
			t.Errorf("%s: parameter %v, want %v (stepped once)", tt.name, v, tt.want)
		}
		s.Update()
		if err := vram.Catch(func() { s.Step(opt, []*vram.Tensor{p}) }); err != nil {
			t.Errorf("%s: Step after Update: %v", tt.name, err)
		}
		p.Release()
	}
}

func TestGradScalerSeveralOptimizers(t *testing.T) {
	inf := float32(math.Inf(1))
	tests := []struct {
		name          string
		gradA, gradB  float32
		unscaleFirst  bool // Unscale each optimizer's parameters before its Step
		wantA, wantB  bool // stepped
		wantScaleMult float64
	}{
		{"both finite", 1, 1, false, true, true, 1},
		{"A overflows", inf, 1, false, false, true, 0.5},
		{"B overflows", 1, inf, true, true, false, 0.5},
		{"both overflow", inf, inf, true, false, false, 0.5},
		{"both finite, unscaled first", 2, 4, true, true, true, 1},
	}
	for _, d := range devices {
		for _, tt := range tests {
			pa, optA := halfParam(t, d)
			pb, optB := halfParam(t, d)
			s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4})
			pa.SetGrad(vram.Full(vram.Shape{4}, 4*float64(tt.gradA), vram.Float16, d))
			pb.SetGrad(vram.Full(vram.Shape{4}, 4*float64(tt.gradB), vram.Float16, d))
			if tt.unscaleFirst {
				for _, p := range []*vram.Tensor{pa, pb} {
					if _, err := s.Unscale([]*vram.Tensor{p}); err != nil {
						t.Fatalf("%v %s: Unscale: %v", d, tt.name, err)
					}
				}
				if _, err := s.Unscale([]*vram.Tensor{pa}); !errors.Is(err, amp.ErrUnscaledTwice) {
					t.Errorf("%v %s: second Unscale of A: %v, want ErrUnscaledTwice", d, tt.name, err)
				}
			}
			gotA := vram.Catch(func() {
				if s.Step(optA, []*vram.Tensor{pa}) != tt.wantA {
					t.Errorf("%v %s: Step(A) stepped = %v, want %v", d, tt.name, !tt.wantA, tt.wantA)
				}
			})
			gotB := vram.Catch(func() {
				if s.Step(optB, []*vram.Tensor{pb}) != tt.wantB {
					t.Errorf("%v %s: Step(B) stepped = %v, want %v", d, tt.name, !tt.wantB, tt.wantB)
				}
			})
			if gotA != nil || gotB != nil {
				t.Fatalf("%v %s: Step: %v, %v", d, tt.name, gotA, gotB)
			}
			for _, c := range []struct {
				p       *vram.Tensor
				g       float32
				stepped bool
			}{{pa, tt.gradA, tt.wantA}, {pb, tt.gradB, tt.wantB}} {
				want := float32(1)
				if c.stepped {
					want = 1 - 0.1*c.g
				}
				if v := c.p.Float32s()[0]; math.Abs(float64(v-want)) > 1e-3 {
					t.Errorf("%v %s: parameter %v, want %v", d, tt.name, v, want)
				}
			}
			if err := vram.Catch(func() { s.Step(optA, []*vram.Tensor{pa}) }); !errors.Is(err, vram.ErrArgument) {
				t.Errorf("%v %s: second Step(A): %v, want ErrArgument", d, tt.name, err)
			}
			s.Update()
			if got, want := s.CurrentScale(), 4*tt.wantScaleMult; got != want {
				t.Errorf("%v %s: scale %v after Update, want %v", d, tt.name, got, want)
			}
			pa.Release()
			pb.Release()
		}
	}
}

func TestGradScalerDisabled(t *testing.T) {
	tests := []struct {
		name string
		grad float64
		want float32 // the parameter after Step
	}{
		{"finite gradient", 2, 0.8},
		{"inf gradient steps anyway", math.Inf(1), float32(math.Inf(-1))},
	}
	for _, tt := range tests {
		p, opt := halfParam(t, vram.CPU)
		s, err := amp.NewGradScaler(amp.GradScalerConfig{Disabled: true})
		if err != nil {
			t.Fatal(err)
		}
		loss := vram.Full(vram.Shape{}, 3, vram.Float16)
		scaled := s.Scale(loss)
		if scaled.DType() != vram.Float16 || scaled.Float32s()[0] != 3 {
			t.Errorf("%s: Scale = %v %v, want the loss unchanged", tt.name, scaled.DType(), scaled.Float32s())
		}
		p.SetGrad(vram.Full(vram.Shape{4}, tt.grad, vram.Float16))
		if found, err := s.Unscale([]*vram.Tensor{p}); found || err != nil {
			t.Errorf("%s: Unscale = %v, %v", tt.name, found, err)
		}
		if !s.Step(opt, []*vram.Tensor{p}) {
			t.Errorf("%s: disabled Step skipped", tt.name)
		}
		if v := p.Float32s()[0]; math.Abs(float64(v-tt.want)) > 1e-3 && v != tt.want {
			t.Errorf("%s: parameter %v, want %v", tt.name, v, tt.want)
		}
		s.Update()
		if s.CurrentScale() != 1 {
			t.Errorf("%s: CurrentScale %v, want 1", tt.name, s.CurrentScale())
		}
		for _, x := range []*vram.Tensor{p, loss, scaled} {
			x.Release()
		}
	}
}

// TestGradScalerZeroValue: a GradScaler declared without NewGradScaler
// behaves as NewGradScaler(GradScalerConfig{}) from whichever call comes
// first: it scaled losses by 0 (every gradient zero), failed to unscale
// by an inverse scale of +Inf and left a state LoadState refuses.
func TestGradScalerZeroValue(t *testing.T) {
	step := func(s *amp.GradScaler, d vram.Device) (stepped bool, grad []float64) {
		p := vram.Ones(vram.Shape{2}, vram.Float32, d).SetRequiresGrad(true)
		defer p.Release()
		opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		loss := p.MulScalar(3).Sum()
		scaled := s.Scale(loss)
		scaled.Backward()
		scaled.Release()
		loss.Release()
		if _, err := s.Unscale([]*vram.Tensor{p}); err != nil {
			t.Fatalf("Unscale: %v", err)
		}
		grad = p.Grad().Float64s()
		stepped = s.Step(opt, []*vram.Tensor{p})
		s.Update()
		return stepped, grad
	}
	tests := []struct {
		name  string
		first func(s *amp.GradScaler) any
	}{
		{"CurrentScale", func(s *amp.GradScaler) any { return s.CurrentScale() }},
		{"State", func(s *amp.GradScaler) any { return s.State() }},
		{"Update", func(s *amp.GradScaler) any { s.Update(); return s.State() }},
		{"UpdateTo", func(s *amp.GradScaler) any { return []any{s.UpdateTo(1024), s.State()} }},
		{"Scale", func(s *amp.GradScaler) any {
			l := vram.Full(vram.Shape{}, 3, vram.Float32)
			defer l.Release()
			r := s.Scale(l)
			defer r.Release()
			return r.Item()
		}},
		{"a whole step", func(s *amp.GradScaler) any {
			stepped, grad := step(s, vram.Sim(0))
			return []any{stepped, grad, s.State()}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, _ := amp.NewGradScaler(amp.GradScalerConfig{})
			var zero amp.GradScaler
			var got, exp any
			if err := vram.Catch(func() { got = tc.first(&zero) }); err != nil {
				t.Fatalf("zero scaler: %v", err)
			}
			exp = tc.first(want)
			if fmt.Sprint(got) != fmt.Sprint(exp) {
				t.Errorf("zero scaler gives %v, NewGradScaler's %v", got, exp)
			}
			if err := zero.LoadState(zero.State()); err != nil {
				t.Errorf("LoadState(State()) of the zero scaler: %v", err)
			}
			// Then a full step on each agrees.
			gs, gg := step(&zero, vram.CPU)
			ws, wg := step(want, vram.CPU)
			if gs != ws || fmt.Sprint(gg) != fmt.Sprint(wg) || zero.State() != want.State() {
				t.Errorf("after a step: zero scaler %v %v %+v, NewGradScaler's %v %v %+v", gs, gg, zero.State(), ws, wg, want.State())
			}
		})
	}
}

// TestGradScalerScaleIsFloat32 follows PyTorch, whose scale lives in a
// float32 tensor: a scale given is rounded to float32, and so is each
// product of growing and backing off, so that get_scale() and state_dict()
// agree after factors that are not powers of two.
func TestGradScalerScaleIsFloat32(t *testing.T) {
	p, opt := halfParam(t, vram.CPU)
	defer p.Release()
	tests := []struct {
		name  string
		cfg   amp.GradScalerConfig
		steps string // per step: 'i' for an inf gradient, 'c' for a clean one
		set   func(s *amp.GradScaler) error
		want  float64
	}{
		{"init scale", amp.GradScalerConfig{InitScale: 1000.1}, "", nil, 1000.0999755859375},
		{"backoff", amp.GradScalerConfig{BackoffFactor: 0.3}, "i", nil, 19660.80078125},
		{"backoff twice", amp.GradScalerConfig{BackoffFactor: 0.3}, "ii", nil, 5898.240234375},
		{"backoff twice then growth", amp.GradScalerConfig{BackoffFactor: 0.3, GrowthFactor: 1.7, GrowthInterval: 1}, "iic", nil, 10027.0087890625},
		{"UpdateTo", amp.GradScalerConfig{}, "", func(s *amp.GradScaler) error { return s.UpdateTo(0.1) }, 0.10000000149011612},
		{"LoadState", amp.GradScalerConfig{}, "", func(s *amp.GradScaler) error {
			return s.LoadState(amp.GradScalerState{Scale: 3.3, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000})
		}, 3.299999952316284},
	}
	for _, tc := range tests {
		s, err := amp.NewGradScaler(tc.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, c := range tc.steps {
			g := float32(1)
			if c == 'i' {
				g = float32(math.Inf(1))
			}
			p.SetGrad(vram.Full(vram.Shape{4}, float64(g), vram.Float16))
			s.Step(opt, []*vram.Tensor{p})
			s.Update()
		}
		if tc.set != nil {
			if err := tc.set(s); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if got := s.CurrentScale(); got != tc.want {
			t.Errorf("%s: CurrentScale %v, want %v", tc.name, got, tc.want)
		}
		if got := s.State().Scale; got != tc.want {
			t.Errorf("%s: State().Scale %v, want %v", tc.name, got, tc.want)
		}
		loss := vram.Scalar(1, vram.Float32)
		scaled := s.Scale(loss)
		if got := scaled.Item(); got != tc.want {
			t.Errorf("%s: Scale(1) %v, want %v", tc.name, got, tc.want)
		}
		scaled.Release()
		loss.Release()
	}
	// A scale that rounds to 0 in float32 is refused, changing nothing.
	if _, err := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 1e-50}); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("InitScale 1e-50: %v, want ErrArgument", err)
	}
	s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 8})
	if err := s.UpdateTo(1e-50); !errors.Is(err, vram.ErrArgument) || s.CurrentScale() != 8 {
		t.Errorf("UpdateTo(1e-50): %v, scale %v, want ErrArgument and 8", err, s.CurrentScale())
	}
}

// TestGradScalerStepNilOptimizer: Step refuses a nil optimizer, and a nil
// pointer held as one, with an error of kind vram.ErrArgument before it
// unscales anything.
func TestGradScalerStepNilOptimizer(t *testing.T) {
	var sgd *optim.SGD
	for _, opt := range []optim.Optimizer{nil, sgd} {
		p := vram.Ones(vram.Shape{4}, vram.WithGrad())
		p.SetGrad(vram.Full(vram.Shape{4}, 8, vram.Float32))
		s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4})
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panicked with %v", r)
				}
			}()
			err = vram.Catch(func() { s.Step(opt, []*vram.Tensor{p}) })
		}()
		if !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%T: %v, want an error matching vram.ErrArgument", opt, err)
		}
		if g := p.Grad().Float32s()[0]; g != 8 {
			t.Errorf("%T: the gradient became %v; it must stay scaled", opt, g)
		}
		p.Release()
	}
}

// TestGradScalerStepWithoutGradients: a Step whose parameters have no
// gradient, unscaled by Unscale or not (Backward forgotten), panics with
// vram.ErrArgument as PyTorch's step raises "No inf checks were recorded
// for this optimizer", stepping nothing and changing nothing: once the
// gradients are there, Step steps. One parameter with a gradient is
// enough, and a disabled scaler steps as PyTorch's does.
func TestGradScalerStepWithoutGradients(t *testing.T) {
	tests := []struct {
		name     string
		disabled bool
		unscale  bool // Unscale before Step
		grads    []bool
		wantErr  bool
	}{
		{"no gradient", false, false, []bool{false}, true},
		{"no gradient, unscaled first", false, true, []bool{false, false}, true},
		{"one of two", false, false, []bool{false, true}, false},
		{"one of two, unscaled first", false, true, []bool{true, false}, false},
		{"disabled", true, false, []bool{false}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var params []*vram.Tensor
			for _, g := range tt.grads {
				p := vram.Ones(vram.Shape{2}, vram.WithGrad())
				defer p.Release()
				if g {
					p.SetGrad(vram.Full(vram.Shape{2}, 4, vram.Float32))
				}
				params = append(params, p)
			}
			opt, err := optim.NewSGD(params, optim.SGDConfig{LR: 1, WeightDecay: 0.5})
			if err != nil {
				t.Fatal(err)
			}
			s, err := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4, GrowthInterval: 1, Disabled: tt.disabled})
			if err != nil {
				t.Fatal(err)
			}
			if tt.unscale {
				if _, err := s.Unscale(params); err != nil {
					t.Fatal(err)
				}
			}
			var stepped bool
			err = vram.Catch(func() { stepped = s.Step(opt, params) })
			if tt.wantErr {
				if !errors.Is(err, vram.ErrArgument) {
					t.Fatalf("Step = %v, %v; want a panic with vram.ErrArgument", stepped, err)
				}
				for i, p := range params {
					if v := p.Float32s()[0]; v != 1 {
						t.Errorf("parameter %d became %v; the optimizer must not step", i, v)
					}
				}
				if st := s.State(); st.Scale != 4 || st.GrowthTracker != 0 {
					t.Errorf("state %+v after a refused Step, want scale 4 and tracker 0", st)
				}
				params[0].SetGrad(vram.Full(vram.Shape{2}, 4, vram.Float32))
				if !tt.unscale {
					err = vram.Catch(func() { stepped = s.Step(opt, params) })
					if err != nil || !stepped {
						t.Fatalf("Step with a gradient after a refused one = %v, %v; want a step", stepped, err)
					}
					if v := params[0].Float32s()[0]; v != 1-1-0.5 {
						t.Errorf("parameter 0 became %v after the step, want %v", v, 1-1-0.5)
					}
				}
				return
			}
			if err != nil || !stepped {
				t.Fatalf("Step = %v, %v; want a step", stepped, err)
			}
		})
	}
}

// TestGradScalerReleasedParameter: Unscale returns, and Step panics with,
// an error matching vram.ErrReleased for a released parameter, changing
// nothing: Unscale skipped it as one without a gradient, and Step then
// blamed a forgotten Backward.
func TestGradScalerReleasedParameter(t *testing.T) {
	tests := []struct {
		name string
		call func(s *amp.GradScaler, opt optim.Optimizer, params []*vram.Tensor) error
	}{
		{"Unscale", func(s *amp.GradScaler, _ optim.Optimizer, params []*vram.Tensor) error {
			_, err := s.Unscale(params)
			return err
		}},
		{"Step", func(s *amp.GradScaler, opt optim.Optimizer, params []*vram.Tensor) error {
			return vram.Catch(func() { s.Step(opt, params) })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := vram.Ones(vram.Shape{2}, vram.WithGrad())
			defer p.Release()
			p.SetGrad(vram.Full(vram.Shape{2}, 4, vram.Float32))
			gone := vram.Ones(vram.Shape{2}, vram.WithGrad())
			gone.SetGrad(vram.Full(vram.Shape{2}, 4, vram.Float32))
			params := []*vram.Tensor{p, gone}
			opt, err := optim.NewSGD(params, optim.SGDConfig{LR: 1})
			if err != nil {
				t.Fatal(err)
			}
			gone.Release()
			s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4})
			if err := tt.call(s, opt, params); !errors.Is(err, vram.ErrReleased) {
				t.Fatalf("got %v, want an error matching vram.ErrReleased", err)
			}
			if g := p.Grad().Float32s()[0]; g != 4 {
				t.Errorf("the other gradient became %v; it must stay scaled", g)
			}
			if _, err := s.Unscale([]*vram.Tensor{p}); err != nil {
				t.Errorf("Unscale of the live parameter after the refusal: %v", err)
			}
		})
	}
}
