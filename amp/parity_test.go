package amp_test

import (
	"errors"
	"github.com/vramgo/vram/optim"
	"math"
	"strings"
	"sync"

	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/nn"
)

// TestAutocastCastsOther16BitOperands follows PyTorch's autocast, which
// casts every float32, float16 and bfloat16 operand of a product to the
// region's dtype: a float16 activation meets a bfloat16 region's matmul as
// bfloat16, and its gradient comes back float16.
func TestAutocastCastsOther16BitOperands(t *testing.T) {
	for _, d := range devices {
		for _, low := range []vram.DType{vram.Float16, vram.BFloat16} {
			other := vram.Float16
			if low == vram.Float16 {
				other = vram.BFloat16
			}
			tests := []struct {
				name   string
				xs, ws vram.Shape
				f      func(x, w *vram.Tensor) *vram.Tensor
			}{
				{"matmul", vram.Shape{4, 3}, vram.Shape{2, 3}, func(x, w *vram.Tensor) *vram.Tensor { return x.MatMul(w.MT()) }},
				{"bmm", vram.Shape{1, 4, 3}, vram.Shape{1, 3, 2}, func(x, w *vram.Tensor) *vram.Tensor { return x.BMM(w) }},
				{"linear", vram.Shape{4, 3}, vram.Shape{2, 3}, func(x, w *vram.Tensor) *vram.Tensor { return vram.Linear(x, w, nil) }},
				{"linear relu", vram.Shape{4, 3}, vram.Shape{2, 3}, func(x, w *vram.Tensor) *vram.Tensor { return vram.LinearAct(x, w, nil, vram.ActReLU) }},
				{"conv2d", vram.Shape{1, 3, 2, 2}, vram.Shape{2, 3, 1, 1}, func(x, w *vram.Tensor) *vram.Tensor { return vram.Conv2d(x, w, nil, vram.Conv2dParams{}) }},
				{"conv_transpose2d", vram.Shape{1, 3, 2, 2}, vram.Shape{3, 2, 1, 1}, func(x, w *vram.Tensor) *vram.Tensor { return vram.ConvTranspose2d(x, w, nil, vram.Conv2dParams{}) }},
			}
			for _, tc := range tests {
				vram.Tidy(func() {
					x := vram.Randn(tc.xs, other, d).SetRequiresGrad(true)
					w := vram.Randn(tc.ws, d).SetRequiresGrad(true)
					var got vram.DType
					err := vram.Catch(func() {
						amp.Autocast(low, func() {
							y := tc.f(x, w)
							got = y.DType()
							y.Sum().Backward()
						})
					})
					if err != nil {
						t.Errorf("%v %v %s of %v and float32: %v", d, low, tc.name, other, err)
						return
					}
					if got != low {
						t.Errorf("%v %v %s of %v and float32: dtype %v, want %v", d, low, tc.name, other, got, low)
					}
					if g := x.Grad(); g == nil || g.DType() != other {
						t.Errorf("%v %v %s: input gradient %v, want %v", d, low, tc.name, g, other)
					}
					if g := w.Grad(); g == nil || g.DType() != vram.Float32 {
						t.Errorf("%v %v %s: weight gradient %v, want float32", d, low, tc.name, g)
					}
				})
			}
		}
	}
}

// TestAutocastNNFloat32Ops checks the layers and losses of nn that
// PyTorch's autocast runs in float32 (layer_norm, group_norm, mse_loss,
// cosine_similarity): inside a region a 16-bit input gives a float32
// result, outside it keeps its dtype, and gradients reach the input in its
// own dtype and the parameters in float32.
func TestAutocastNNFloat32Ops(t *testing.T) {
	ln := nn.NewLayerNorm([]int{4}, 1e-5)
	gn := nn.NewGroupNorm(2, 4, 1e-5)
	gnNoAffine := nn.NewGroupNormNoAffine(2, 4, 1e-5)
	params := []*vram.Tensor{ln.Weight, ln.Bias, gn.Weight, gn.Bias}
	tests := []struct {
		name string
		f    func(x *vram.Tensor) *vram.Tensor
	}{
		{"LayerNorm", ln.Forward},
		{"GroupNorm", gn.Forward},
		{"GroupNorm without affine", gnNoAffine.Forward},
		{"MSELossWith sum", func(x *vram.Tensor) *vram.Tensor { return nn.MSELossWith(x, x.Detach(), nn.ReductionSum) }},
		{"MSELossWith none", func(x *vram.Tensor) *vram.Tensor { return nn.MSELossWith(x, x.Detach(), nn.ReductionNone) }},
		{"CosineSimilarity", func(x *vram.Tensor) *vram.Tensor { return nn.CosineSimilarity(x, x.Detach(), 1, 1e-8) }},
	}
	for _, low := range []vram.DType{vram.Float16, vram.BFloat16} {
		for _, tc := range tests {
			for _, region := range []bool{true, false} {
				vram.Tidy(func() {
					for _, p := range params {
						p.SetGrad(nil)
					}
					x := vram.Randn(vram.Shape{2, 4, 4}, low).SetRequiresGrad(true)
					var y *vram.Tensor
					if region {
						amp.Autocast(low, func() { y = tc.f(x) })
					} else {
						y = tc.f(x)
					}
					want := low
					if region {
						want = vram.Float32
					}
					if y.DType() != want {
						t.Errorf("%v %s (in a region: %v): dtype %v, want %v", low, tc.name, region, y.DType(), want)
					}
					y.Sum().Backward()
					if g := x.Grad(); g == nil || g.DType() != low {
						t.Errorf("%v %s (in a region: %v): input gradient %v, want %v", low, tc.name, region, g, low)
					}
					for _, p := range params {
						if g := p.Grad(); g != nil && g.DType() != vram.Float32 {
							t.Errorf("%v %s: parameter gradient in %v, want float32", low, tc.name, g.DType())
						}
					}
				})
			}
		}
	}
}

// TestNoAutocast follows torch.autocast(enabled=False) nested in an
// enabled region: inside, ops run in their inputs' dtypes (the block casts
// explicitly), Enabled reports false, a region opened inside applies, and
// the outer policy resumes afterwards, also after a panic.
func TestNoAutocast(t *testing.T) {
	x := vram.Randn(vram.Shape{4, 4})
	defer x.Release()
	h := x.Half()
	defer h.Release()
	type step struct {
		name string
		f    func() *vram.Tensor
		want vram.DType
	}
	matmul := func() *vram.Tensor { return x.MatMul(x) }
	tests := []struct {
		name   string
		region bool // inside Autocast(Float16)
		inner  func(check func(step))
		after  vram.DType // MatMul's dtype after NoAutocast returns
	}{
		{"float32 product", true, func(check func(step)) {
			check(step{"matmul", matmul, vram.Float32})
			check(step{"linear", func() *vram.Tensor { return vram.Linear(x, x, nil) }, vram.Float32})
		}, vram.Float16},
		{"16-bit input stays 16-bit", true, func(check func(step)) {
			check(step{"softmax", func() *vram.Tensor { return h.Softmax(1) }, vram.Float16})
			check(step{"sum", func() *vram.Tensor { return h.Sum() }, vram.Float16})
		}, vram.Float16},
		{"explicit cast", true, func(check func(step)) {
			check(step{"float matmul", func() *vram.Tensor {
				f := h.Float()
				defer f.Release()
				return f.MatMul(f)
			}, vram.Float32})
		}, vram.Float16},
		{"region inside", true, func(check func(step)) {
			amp.Autocast(vram.BFloat16, func() { check(step{"matmul", matmul, vram.BFloat16}) })
			check(step{"matmul after", matmul, vram.Float32})
		}, vram.Float16},
		{"outside any region", false, func(check func(step)) {
			check(step{"matmul", matmul, vram.Float32})
		}, vram.Float32},
	}
	for _, tc := range tests {
		body := func() {
			amp.NoAutocast(func() {
				if dt, ok := amp.Enabled(); ok {
					t.Errorf("%s: Enabled() = %v inside NoAutocast", tc.name, dt)
				}
				tc.inner(func(s step) {
					r := s.f()
					if r.DType() != s.want {
						t.Errorf("%s: %s gave %v, want %v", tc.name, s.name, r.DType(), s.want)
					}
					r.Release()
				})
			})
			r := matmul()
			if r.DType() != tc.after {
				t.Errorf("%s: matmul after NoAutocast gave %v, want %v", tc.name, r.DType(), tc.after)
			}
			r.Release()
			// A panic inside NoAutocast restores the region too.
			if err := vram.Catch(func() { amp.NoAutocast(func() { panic(&vram.Error{Op: "test", Kind: vram.ErrArgument}) }) }); err == nil {
				t.Errorf("%s: the panic inside NoAutocast was lost", tc.name)
			}
			if dt, ok := amp.Enabled(); ok != tc.region || (ok && dt != vram.Float16) {
				t.Errorf("%s: Enabled() = %v, %v after a panic in NoAutocast", tc.name, dt, ok)
			}
		}
		if tc.region {
			amp.Autocast(vram.Float16, body)
		} else {
			body()
		}
	}
}

// TestNoAutocastConcurrent runs regions, suspended blocks and nested
// regions on many goroutines at once: each sees only its own policy.
func TestNoAutocastConcurrent(t *testing.T) {
	x := vram.Randn(vram.Shape{4, 4}, vram.Sim(0))
	defer x.Release()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	want := func(where string, dt vram.DType) {
		r := x.MatMul(x)
		if r.DType() != dt {
			select {
			case errs <- where + ": got " + r.DType().String() + ", want " + dt.String():
			default:
			}
		}
		r.Release()
	}
	for i := range 8 {
		low := []vram.DType{vram.Float16, vram.BFloat16}[i%2]
		wg.Go(func() {
			for range 20 {
				amp.Autocast(low, func() {
					want("region", low)
					amp.NoAutocast(func() {
						want("suspended", vram.Float32)
						amp.Autocast(vram.BFloat16, func() { want("nested", vram.BFloat16) })
						want("suspended again", vram.Float32)
					})
					want("resumed", low)
				})
				want("outside", vram.Float32)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestAutocastPromotesScatterAdd follows PyTorch's promote list, which
// holds scatter_add: inside a region, operands of different float dtypes
// are taken in float32 (outside, different dtypes are an error), and
// gradients come back in each operand's dtype.
func TestAutocastPromotesScatterAdd(t *testing.T) {
	tests := []struct {
		self, src vram.DType
		want      vram.DType // 0: ErrDType
	}{
		{vram.Float32, vram.Float16, vram.Float32},
		{vram.Float16, vram.Float32, vram.Float32},
		{vram.BFloat16, vram.Float32, vram.Float32},
		{vram.Float16, vram.BFloat16, vram.Float32},
		{vram.Float16, vram.Float16, vram.Float16},
		{vram.Float64, vram.Float16, 0},
		{vram.Int64, vram.Float32, 0},
	}
	for _, d := range devices {
		for _, tc := range tests {
			for _, region := range []bool{true, false} {
				vram.Tidy(func() {
					self := vram.Ones(vram.Shape{2, 3}, tc.self, d)
					src := vram.Ones(vram.Shape{2, 3}, tc.src, d)
					if tc.self.IsFloat() {
						self.SetRequiresGrad(true)
					}
					src.SetRequiresGrad(true)
					idx := vram.Zeros(vram.Shape{2, 3}, vram.Int64, d)
					var out *vram.Tensor
					err := vram.Catch(func() {
						run := func() { out = self.ScatterAdd(0, idx, src) }
						if region {
							amp.Autocast(vram.Float16, run)
						} else {
							run()
						}
					})
					want := tc.want
					if !region && tc.self != tc.src {
						want = 0
					}
					if want == 0 {
						if !errors.Is(err, vram.ErrDType) {
							t.Errorf("%v %v scatter_add %v (in a region: %v): error %v, want ErrDType", d, tc.self, tc.src, region, err)
						}
						return
					}
					if err != nil {
						t.Errorf("%v %v scatter_add %v (in a region: %v): %v", d, tc.self, tc.src, region, err)
						return
					}
					if out.DType() != want {
						t.Errorf("%v %v scatter_add %v (in a region: %v): dtype %v, want %v", d, tc.self, tc.src, region, out.DType(), want)
					}
					if got := out.Sum().Item(); got != 12 {
						t.Errorf("%v %v scatter_add %v: sum %v, want 12", d, tc.self, tc.src, got)
					}
					out.Sum().Backward()
					for _, p := range []*vram.Tensor{self, src} {
						if g := p.Grad(); g == nil || g.DType() != p.DType() {
							t.Errorf("%v %v scatter_add %v: gradient %v for a %v operand", d, tc.self, tc.src, g, p.DType())
						}
					}
				})
			}
		}
	}
}

// TestGradScalerMisuse: misuse of Unscale and Step fails with errors of
// kind vram.ErrArgument and changes no gradient and no parameter.
func TestGradScalerMisuse(t *testing.T) {
	tests := []struct {
		name    string
		run     func(s *amp.GradScaler, opt optim.Optimizer, p, q *vram.Tensor) error
		twice   bool   // the error is also ErrUnscaledTwice
		mention string // the message names this
		grad    float32
	}{
		{"Unscale twice", func(s *amp.GradScaler, _ optim.Optimizer, p, q *vram.Tensor) error {
			if _, err := s.Unscale([]*vram.Tensor{p, q}); err != nil {
				return nil
			}
			_, err := s.Unscale([]*vram.Tensor{p})
			return err
		}, true, "once per step", 2},
		{"Unscale after Step", func(s *amp.GradScaler, opt optim.Optimizer, p, q *vram.Tensor) error {
			s.Step(opt, []*vram.Tensor{p, q})
			_, err := s.Unscale([]*vram.Tensor{p})
			return err
		}, true, "unscaled by Step", 2},
		{"Unscale of a nil parameter", func(s *amp.GradScaler, _ optim.Optimizer, p, _ *vram.Tensor) error {
			_, err := s.Unscale([]*vram.Tensor{p, nil})
			return err
		}, false, "parameter 1 is nil", 8},
		{"Step without parameters", func(s *amp.GradScaler, opt optim.Optimizer, _, _ *vram.Tensor) error {
			return vram.Catch(func() { s.Step(opt, nil) })
		}, false, "no parameters", 8},
		{"Step with a nil parameter", func(s *amp.GradScaler, opt optim.Optimizer, p, _ *vram.Tensor) error {
			return vram.Catch(func() { s.Step(opt, []*vram.Tensor{p, nil}) })
		}, false, "parameter 1 is nil", 8},
	}
	for _, tc := range tests {
		vram.Tidy(func() {
			s, err := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4})
			if err != nil {
				t.Fatal(err)
			}
			p := vram.Ones(vram.Shape{2}).SetRequiresGrad(true)
			q := vram.Ones(vram.Shape{2}).SetRequiresGrad(true) // no gradient
			p.SetGrad(vram.Full(vram.Shape{2}, 8))
			opt, err := optim.NewSGD([]*vram.Tensor{p, q}, optim.SGDConfig{LR: 1})
			if err != nil {
				t.Fatal(err)
			}
			before := p.Float32s()
			if tc.name == "Unscale after Step" {
				before = []float32{-1, -1} // 1 - 8/4
			}
			err = tc.run(s, opt, p, q)
			if !errors.Is(err, vram.ErrArgument) || errors.Is(err, amp.ErrUnscaledTwice) != tc.twice {
				t.Errorf("%s: error %v, want ErrArgument (ErrUnscaledTwice: %v)", tc.name, err, tc.twice)
			} else if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, tc.mention)
			}
			if g := p.Grad().Float32s(); g[0] != tc.grad || g[1] != tc.grad {
				t.Errorf("%s: gradient %v, want %v", tc.name, g, tc.grad)
			}
			if got := p.Float32s(); got[0] != before[0] || got[1] != before[1] {
				t.Errorf("%s: parameter %v, want %v", tc.name, got, before)
			}
			if q.Grad() != nil {
				t.Errorf("%s: a parameter without gradient got one", tc.name)
			}
		})
	}
}

// TestGradScalerClipAfterUnscale: gradients unscaled by Unscale and then
// clipped reach the optimizer as clipped, not unscaled a second time, and
// parameters without a gradient are skipped.
func TestGradScalerClipAfterUnscale(t *testing.T) {
	s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4})
	p := vram.Ones(vram.Shape{2}).SetRequiresGrad(true)
	q := vram.Ones(vram.Shape{2}).SetRequiresGrad(true)
	defer p.Release()
	defer q.Release()
	p.SetGrad(vram.Full(vram.Shape{2}, 12)) // unscaled: [3, 3], norm 3√2
	opt, _ := optim.NewSGD([]*vram.Tensor{p, q}, optim.SGDConfig{LR: 1})
	params := []*vram.Tensor{p, q}
	if inf, err := s.Unscale(params); inf || err != nil {
		t.Fatalf("Unscale: %v, %v", inf, err)
	}
	if norm := optim.ClipGradNorm(params, 1); math.Abs(norm-3*math.Sqrt2) > 1e-5 {
		t.Errorf("norm %v before clipping, want %v", norm, 3*math.Sqrt2)
	}
	if !s.Step(opt, params) {
		t.Fatal("Step skipped clean gradients")
	}
	s.Update()
	want := 1 - 1/math.Sqrt2
	for i, v := range p.Float32s() {
		if math.Abs(float64(v)-want) > 1e-5 {
			t.Errorf("p[%d] = %v, want %v", i, v, want)
		}
	}
	if got := q.Float32s(); got[0] != 1 || got[1] != 1 {
		t.Errorf("a parameter without gradient moved: %v", got)
	}
}

// TestGradScalerUpdateTo follows PyTorch's update(new_scale): the scale is
// set whatever the step found, the growth count is kept, the next step
// starts; a bad scale is refused, changing nothing.
func TestGradScalerUpdateTo(t *testing.T) {
	tests := []struct {
		name     string
		scale    float64
		foundInf bool
		ok       bool
	}{
		{"clean step", 1024, false, true},
		{"step with inf", 3, true, true},
		{"float32 max", math.MaxFloat32, false, true},
		{"zero", 0, false, false},
		{"negative", -2, false, false},
		{"NaN", math.NaN(), false, false},
		{"past float32", math.MaxFloat32 * 2, false, false},
	}
	for _, tc := range tests {
		s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 8, GrowthInterval: 4})
		s.Update() // one clean step: growth tracker 1
		p := vram.Ones(vram.Shape{2}).SetRequiresGrad(true)
		g := 1.0
		if tc.foundInf {
			g = math.Inf(1)
		}
		p.SetGrad(vram.Full(vram.Shape{2}, g))
		if _, err := s.Unscale([]*vram.Tensor{p}); err != nil {
			t.Fatal(err)
		}
		before := s.State()
		err := s.UpdateTo(tc.scale)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, vram.ErrArgument)) {
			t.Errorf("%s: UpdateTo(%v) = %v", tc.name, tc.scale, err)
		}
		want := before
		if tc.ok {
			want.Scale = tc.scale
		}
		if s.State() != want {
			t.Errorf("%s: state %+v, want %+v", tc.name, s.State(), want)
		}
		// A new step starts only after a successful UpdateTo.
		_, err = s.Unscale([]*vram.Tensor{p})
		if tc.ok != (err == nil) {
			t.Errorf("%s: Unscale after UpdateTo: %v", tc.name, err)
		}
		p.Release()
	}
	off, _ := amp.NewGradScaler(amp.GradScalerConfig{Disabled: true})
	if err := off.UpdateTo(-1); err != nil || off.CurrentScale() != 1 {
		t.Errorf("disabled UpdateTo: %v, scale %v", err, off.CurrentScale())
	}
}

// TestGradScalerTiedParameters: a parameter listed twice (a weight tied
// between two modules whose parameter lists are joined) is unscaled once,
// by Unscale and by Step, through the fused kernel and the composed ops.
func TestGradScalerTiedParameters(t *testing.T) {
	tests := []struct {
		name    string
		strided bool // a non-contiguous gradient takes the composed path
		unscale bool // Unscale before Step
	}{
		{"Unscale, contiguous", false, true},
		{"Unscale, strided", true, true},
		{"Step, contiguous", false, false},
		{"Step, strided", true, false},
	}
	for _, d := range devices {
		for _, tc := range tests {
			vram.Tidy(func() {
				s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4})
				p := vram.Ones(vram.Shape{2, 2}, d).SetRequiresGrad(true)
				g := vram.Full(vram.Shape{2, 2}, 8, d)
				if tc.strided {
					g = g.MT()
				}
				p.SetGrad(g)
				opt, _ := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 1})
				params := []*vram.Tensor{p, p}
				if tc.unscale {
					if _, err := s.Unscale(params); err != nil {
						t.Fatal(err)
					}
					if got := p.Grad().Float32s(); got[0] != 2 {
						t.Errorf("%v %s: unscaled gradient %v, want 2s", d, tc.name, got)
					}
				}
				if !s.Step(opt, params) {
					t.Fatalf("%v %s: Step skipped", d, tc.name)
				}
				if got := p.Float32s(); got[0] != -1 {
					t.Errorf("%v %s: parameter %v after the step, want 1 - 8/4 = -1s", d, tc.name, got)
				}
			})
		}
	}
}
