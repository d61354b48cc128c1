package optim_test

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/optim"
)

func TestMain(m *testing.M) {
	if err := vram.Configure(vram.Config{SimDevices: []int64{256 << 20, 256 << 20}}); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

func checkValues(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		if bothNaN := math.IsNaN(got[i]) && math.IsNaN(want[i]); !bothNaN && !(math.Abs(got[i]-want[i]) <= tol*(1+math.Abs(want[i]))) {
			t.Fatalf("%s: got %v, want %v (element %d)", what, got, want, i)
		}
	}
}

// setGrad gives p the gradient vals.
func setGrad(p *vram.Tensor, vals ...float64) {
	p.SetGrad(vram.FromSlice(vals, p.Shape(), p.DType(), p.Device()))
}

// The tiny problem of the one-step tests: p = [1, -2] in float64, first
// gradient [0.5, 1], second gradient [-1, 2], lr 0.1 unless said otherwise.
// The expected values were worked out by hand from the update rules in
// PyTorch's documentation of torch.optim.SGD, Adam and AdamW.
var grads = [][]float64{{0.5, 1}, {-1, 2}}

func TestSGDSteps(t *testing.T) {
	tests := []struct {
		name  string
		cfg   optim.SGDConfig
		grads [][]float64
		want  [][]float64 // parameters after each step
	}{
		{"plain", optim.SGDConfig{LR: 0.1}, grads, [][]float64{
			{0.95, -2.1},   // p - 0.1·[0.5, 1]
			{1.05, -2.3}}}, // p - 0.1·[-1, 2]
		{"weight decay", optim.SGDConfig{LR: 0.1, WeightDecay: 0.1}, grads[:1], [][]float64{
			{0.94, -2.08}}}, // d = g + 0.1·p = [0.6, 0.8]
		{"momentum and dampening", optim.SGDConfig{LR: 0.1, Momentum: 0.9, Dampening: 0.5}, [][]float64{{0.5, 1}, {0.5, 1}}, [][]float64{
			{0.95, -2.1},    // the buffer starts as the gradient, undamped
			{0.88, -2.24}}}, // b = 0.9·[0.5, 1] + 0.5·[0.5, 1] = [0.7, 1.4]
		{"momentum", optim.SGDConfig{LR: 0.1, Momentum: 0.5}, grads, [][]float64{
			{0.95, -2.1},
			{1.025, -2.35}}}, // b = 0.5·[0.5, 1] + [-1, 2] = [-0.75, 2.5]
		{"nesterov with weight decay", optim.SGDConfig{LR: 0.1, Momentum: 0.9, WeightDecay: 0.1, Nesterov: true},
			[][]float64{{0.5, 1}, {0.5, 1}}, [][]float64{
				// d = [0.6, 0.8]; b = d; d + 0.9·b = [1.14, 1.52]
				{0.886, -2.152},
				// d = g + 0.1·p = [0.5886, 0.7848]; b = 0.9·[0.6, 0.8] + d =
				// [1.1286, 1.5048]; d + 0.9·b = [1.60434, 2.13912]
				{0.725566, -2.365912}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := vram.FromSlice([]float64{1, -2}, nil, vram.WithGrad())
			opt, err := optim.NewSGD([]*vram.Tensor{p}, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer opt.Release()
			for i, g := range tt.grads {
				setGrad(p, g...)
				opt.Step()
				checkValues(t, "step", p.Float64s(), tt.want[i], 1e-12)
			}
		})
	}
}

func TestAdamSteps(t *testing.T) {
	tests := []struct {
		name      string
		decoupled bool
		cfg       optim.AdamConfig
		want      [][]float64
	}{
		// Step 1: m = 0.1·g, v = 0.001·g², and after bias correction the
		// step is lr·g/(|g|+eps). Step 2 (element 0): m = 0.9·0.05 + 0.1·(-1)
		// = -0.055, v = 0.999·0.00025 + 0.001·1 = 0.00124975,
		// p = 0.900000002 - 0.1/0.19 · m / (sqrt(v/0.001999) + 1e-8).
		{"adam defaults", false, optim.AdamConfig{LR: 0.1}, [][]float64{
			{0.900000002, -2.099999999},
			{0.9366103542405654, -2.1965182009718336}}},
		// L2: the gradient becomes g + 0.1·p.
		{"adam weight decay", false, optim.AdamConfig{LR: 0.1, WeightDecay: 0.1}, [][]float64{
			{0.9000000016666666, -2.09999999875},
			{0.9252635194456061, -2.1952720095868674}}},
		// Decoupled: p·(1 - 0.1·0.01) first, then the Adam step.
		{"adamw defaults", true, optim.AdamConfig{LR: 0.1}, [][]float64{
			{0.899000002, -2.0979999990000002},
			{0.9347113542385653, -2.1924202009728337}}},
		// Step 1 (element 0): p = 1·(1-0.005) = 0.995; m = 0.25, v = 0.0625,
		// m̂ = 0.5, v̂ = 0.25, p -= 0.01·0.5/(0.5+0.1).
		{"adamw custom", true, optim.AdamConfig{LR: 0.01, Beta1: 0.5, Beta2: 0.75, Eps: 0.1, WeightDecay: 0.5}, [][]float64{
			{0.9866666666666667, -1.999090909090909},
			{0.9871460270270678, -1.9986328401720355}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := vram.FromSlice([]float64{1, -2}, nil, vram.WithGrad())
			newOpt := optim.NewAdam
			if tt.decoupled {
				newOpt = optim.NewAdamW
			}
			opt, err := newOpt([]*vram.Tensor{p}, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer opt.Release()
			for i, g := range grads {
				setGrad(p, g...)
				opt.Step()
				checkValues(t, "step", p.Float64s(), tt.want[i], 1e-12)
			}
		})
	}
}

func TestAdamDefaults(t *testing.T) {
	p := vram.Zeros(vram.Shape{1}, vram.WithGrad())
	a, _ := optim.NewAdam([]*vram.Tensor{p}, optim.AdamConfig{})
	w, _ := optim.NewAdamW([]*vram.Tensor{p}, optim.AdamConfig{})
	if got, want := a.Config(), (optim.AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}); got != want {
		t.Errorf("Adam defaults %+v, want %+v", got, want)
	}
	if got, want := w.Config(), (optim.AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, DecoupledWeightDecay: true}); got != want {
		t.Errorf("AdamW defaults %+v, want %+v", got, want)
	}
}

// Each optimizer minimises f(p) = sum((p - c)²) from a random start.
func TestMinimiseQuadratic(t *testing.T) {
	tests := []struct {
		name  string
		steps int
		make  func(ps []*vram.Tensor) (optim.Optimizer, error)
	}{
		{"sgd", 200, func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1})
		}},
		{"sgd momentum", 300, func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05, Momentum: 0.9})
		}},
		{"sgd nesterov", 300, func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05, Momentum: 0.9, Nesterov: true})
		}},
		{"adam", 500, func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdam(ps, optim.AdamConfig{LR: 0.05})
		}},
		{"adamw", 500, func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamW(ps, optim.AdamConfig{LR: 0.05, WeightDecay: 1e-4})
		}},
	}
	for _, tt := range tests {
		for _, dt := range []vram.DType{vram.Float64, vram.Float32} {
			t.Run(tt.name+"/"+dt.String(), func(t *testing.T) {
				g := vram.NewGenerator(1)
				c := vram.FromSlice([]float64{3, -1, 0.5, 2}, vram.Shape{2, 2}, dt)
				p := vram.Randn(vram.Shape{2, 2}, dt, vram.WithGenerator(g), vram.WithGrad())
				opt, err := tt.make([]*vram.Tensor{p})
				if err != nil {
					t.Fatal(err)
				}
				for range tt.steps {
					vram.Tidy(func() {
						opt.ZeroGrad()
						p.Sub(c).Square().Sum().Backward()
						opt.Step()
					})
				}
				tol := 1e-3
				if tt.name == "adamw" {
					tol = 1e-2 // the decay pulls slightly towards 0
				}
				checkValues(t, "minimum", p.Float64s(), c.Float64s(), tol)
				opt.(interface{ Release() }).Release()
			})
		}
	}
}

// After the state exists, Step allocates nothing that outlives it.
func TestStepLeavesNoTemporaries(t *testing.T) {
	makers := map[string]func(ps []*vram.Tensor) (optim.Optimizer, error){
		"sgd": func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1, Momentum: 0.9, WeightDecay: 0.01, Nesterov: true})
		},
		"adam": func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdam(ps, optim.AdamConfig{WeightDecay: 0.01})
		},
		"adamw": func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewAdamW(ps, optim.AdamConfig{}) },
		"amsgrad": func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamW(ps, optim.AdamConfig{AMSGrad: true, Maximize: true})
		},
		"rmsprop": func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewRMSprop(ps, optim.RMSpropConfig{Momentum: 0.9, Centered: true, WeightDecay: 0.01, Maximize: true})
		},
		"adagrad": func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdagrad(ps, optim.AdagradConfig{LRDecay: 0.1, WeightDecay: 0.01})
		},
	}
	for name, mk := range makers {
		t.Run(name, func(t *testing.T) {
			memtest.Settle()
			leaked := vram.Storage(vram.CPU).Leaked
			a := vram.Randn(vram.Shape{16, 8}, vram.WithGrad())
			b := vram.Randn(vram.Shape{8}, vram.WithGrad())
			c := vram.Randn(vram.Shape{3}, vram.WithGrad()) // never gets a gradient
			opt, err := mk([]*vram.Tensor{a, b, c})
			if err != nil {
				t.Fatal(err)
			}
			setGrad(a, make([]float64, 128)...)
			setGrad(b, 1, 2, 3, 4, 5, 6, 7, 8)
			opt.Step() // creates the state
			withState := vram.MemoryAllocated(vram.CPU)
			for range 5 {
				opt.Step()
				if now := vram.MemoryAllocated(vram.CPU); now != withState {
					t.Fatalf("%d bytes live after Step, %d before", now, withState)
				}
			}
			// Release frees the state: two tensors of a and b for momentum
			// SGD and Adagrad, four for Adam, six with amsgrad and for
			// centered RMSprop with momentum.
			opt.(interface{ Release() }).Release()
			freed := withState - vram.MemoryAllocated(vram.CPU)
			want := int64(4 * (128 + 8))
			switch name {
			case "amsgrad", "rmsprop":
				want *= 3
			case "adam", "adamw":
				want *= 2
			}
			if freed != want {
				t.Fatalf("Release freed %d bytes, want %d", freed, want)
			}
			opt.ZeroGrad()
			if a.Grad() != nil || b.Grad() != nil {
				t.Fatal("ZeroGrad left a gradient")
			}
			for _, p := range []*vram.Tensor{a, b, c} {
				p.Release()
			}
			memtest.Settle()
			if n := vram.Storage(vram.CPU).Leaked - leaked; n != 0 {
				t.Fatalf("%d tensors left to the garbage collector", n)
			}
		})
	}
}

func TestStepSkipsParametersWithoutGrad(t *testing.T) {
	a := vram.FromSlice([]float64{1, 2}, nil, vram.WithGrad())
	b := vram.FromSlice([]float64{3, 4}, nil, vram.WithGrad())
	opt, _ := optim.NewAdam([]*vram.Tensor{a, b}, optim.AdamConfig{LR: 0.1})
	setGrad(a, 1, 1)
	opt.Step()
	checkValues(t, "b", b.Float64s(), []float64{3, 4}, 0)
	checkValues(t, "a", a.Float64s(), []float64{0.9, 1.9}, 1e-7)
	// b's first step is its step 1, with its own bias correction.
	setGrad(b, 1, 1)
	b0 := b.Float64s()
	opt.Step()
	checkValues(t, "b after its first step", b.Float64s(), []float64{b0[0] - 0.1, b0[1] - 0.1}, 1e-7)
}

func TestStateFollowsParameterDevice(t *testing.T) {
	p := vram.FromSlice([]float64{1, -2}, nil, vram.WithGrad())
	q := vram.FromSlice([]float64{1, -2}, nil, vram.WithGrad()) // stays on the CPU
	for _, mk := range []func() (interface {
		optim.Optimizer
		Release()
	}, error){
		func() (interface {
			optim.Optimizer
			Release()
		}, error) {
			return optim.NewSGD([]*vram.Tensor{p, q}, optim.SGDConfig{LR: 0.1, Momentum: 0.5})
		},
		func() (interface {
			optim.Optimizer
			Release()
		}, error) {
			return optim.NewAdam([]*vram.Tensor{p, q}, optim.AdamConfig{LR: 0.1})
		},
	} {
		opt, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		setGrad(p, grads[0]...)
		setGrad(q, grads[0]...)
		opt.Step()
		p.MoveTo(vram.Sim(0))
		setGrad(p, grads[1]...)
		setGrad(q, grads[1]...)
		opt.Step() // must not panic with a device mismatch
		if p.Device() != vram.Sim(0) {
			t.Fatalf("parameter on %v", p.Device())
		}
		// The moved parameter took the same steps as the one that stayed.
		checkValues(t, "moved", p.Float64s(), q.Float64s(), 0)
		opt.Release()
		p.MoveTo(vram.CPU)
		vram.NoGrad(func() { p.CopyFrom(q) })
	}
}

func TestConstructorErrors(t *testing.T) {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	released := vram.Zeros(vram.Shape{2})
	released.Release()
	nonLeaf := p.MulScalar(2)
	ps := []*vram.Tensor{p}
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"sgd infinite lr", func() error { _, err := optim.NewSGD(ps, optim.SGDConfig{LR: math.Inf(1)}); return err }, "learning rate"},
		{"sgd negative lr", func() error { _, err := optim.NewSGD(ps, optim.SGDConfig{LR: -1}); return err }, "learning rate"},
		{"sgd NaN lr", func() error { _, err := optim.NewSGD(ps, optim.SGDConfig{LR: math.NaN()}); return err }, "learning rate"},
		{"sgd negative momentum", func() error { _, err := optim.NewSGD(ps, optim.SGDConfig{LR: 1, Momentum: -1}); return err }, "momentum"},
		{"sgd negative weight decay", func() error { _, err := optim.NewSGD(ps, optim.SGDConfig{LR: 1, WeightDecay: -1}); return err }, "weight decay"},
		{"sgd nesterov without momentum", func() error { _, err := optim.NewSGD(ps, optim.SGDConfig{LR: 1, Nesterov: true}); return err }, "Nesterov"},
		{"sgd nesterov with dampening", func() error {
			_, err := optim.NewSGD(ps, optim.SGDConfig{LR: 1, Momentum: 0.9, Dampening: 0.1, Nesterov: true})
			return err
		}, "Nesterov"},
		{"adam negative lr", func() error { _, err := optim.NewAdam(ps, optim.AdamConfig{LR: -1}); return err }, "learning rate"},
		{"adam beta1 one", func() error { _, err := optim.NewAdam(ps, optim.AdamConfig{Beta1: 1}); return err }, "beta1"},
		{"adam negative beta2", func() error { _, err := optim.NewAdam(ps, optim.AdamConfig{Beta2: -0.5}); return err }, "beta2"},
		{"adamw beta2 above one", func() error { _, err := optim.NewAdamW(ps, optim.AdamConfig{Beta2: 1.5}); return err }, "beta2"},
		{"adam negative eps", func() error { _, err := optim.NewAdam(ps, optim.AdamConfig{Eps: -1e-8}); return err }, "epsilon"},
		{"adamw negative weight decay", func() error { _, err := optim.NewAdamW(ps, optim.AdamConfig{WeightDecay: -1}); return err }, "weight decay"},
		{"no parameters", func() error { _, err := optim.NewAdam(nil, optim.AdamConfig{}); return err }, "empty parameter list"},
		{"nil parameter", func() error { _, err := optim.NewSGD([]*vram.Tensor{nil}, optim.SGDConfig{LR: 1}); return err }, "nil"},
		{"released parameter", func() error { _, err := optim.NewSGD([]*vram.Tensor{released}, optim.SGDConfig{LR: 1}); return err }, "released"},
		{"int parameter", func() error {
			_, err := optim.NewSGD([]*vram.Tensor{vram.Zeros(vram.Shape{1}, vram.Int64)}, optim.SGDConfig{LR: 1})
			return err
		}, "floating-point"},
		{"non-leaf parameter", func() error { _, err := optim.NewAdam([]*vram.Tensor{nonLeaf}, optim.AdamConfig{}); return err }, "leaf"},
		{"repeated parameter", func() error { _, err := optim.NewAdam([]*vram.Tensor{p, p}, optim.AdamConfig{}); return err }, "same tensor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			if err == nil || !strings.HasPrefix(err.Error(), "optim: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
			kind := vram.ErrArgument
			switch tt.want {
			case "released":
				kind = vram.ErrReleased
			case "floating-point":
				kind = vram.ErrDType
			}
			if !errors.Is(err, kind) {
				t.Fatalf("err = %v, want one of kind %v", err, kind)
			}
		})
	}
}

func TestLR(t *testing.T) {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	sgd, _ := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.1})
	adam, _ := optim.NewAdam([]*vram.Tensor{p}, optim.AdamConfig{})
	for _, opt := range []optim.Optimizer{sgd, adam} {
		opt.SetLR(0.5)
		if opt.LR() != 0.5 {
			t.Fatalf("LR %v after SetLR(0.5)", opt.LR())
		}
		for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
			if err := vram.Catch(func() { opt.SetLR(bad) }); !errors.Is(err, vram.ErrArgument) {
				t.Errorf("SetLR(%v): %v", bad, err)
			}
		}
	}
	// A zero rate leaves the parameters alone.
	sgd.SetLR(0)
	setGrad(p, 1, 1)
	sgd.Step()
	checkValues(t, "p", p.Float64s(), []float64{0, 0}, 0)
}

func TestClipGradNorm(t *testing.T) {
	tests := []struct {
		name    string
		maxNorm float64
		grads   [][]float64 // nil: the parameter has no gradient
		norm    float64
		want    [][]float64
	}{
		{"below the limit", 10, [][]float64{{3, 4}}, 5, [][]float64{{3, 4}}},
		// PyTorch scales whenever maxNorm/(norm+1e-6) < 1, so a norm
		// equal to the limit is scaled by a hair.
		{"at the limit", 5, [][]float64{{3, 4}}, 5, [][]float64{{3 * 5 / (5 + 1e-6), 4 * 5 / (5 + 1e-6)}}},
		{"just below the limit", 5 + 1e-6, [][]float64{{3, 4}}, 5, [][]float64{{3, 4}}},
		{"zero max norm", 0, [][]float64{{3, 4}}, 5, [][]float64{{0, 0}}},
		{"no gradients", 1, [][]float64{nil, nil}, 0, [][]float64{nil, nil}},
		// A NaN norm scales by NaN, as PyTorch's clip_coef does.
		{"NaN norm", 1, [][]float64{{3, math.NaN()}, {1}}, math.NaN(), [][]float64{{math.NaN(), math.NaN()}, {math.NaN()}}},
		{"infinite norm", 1, [][]float64{{3, math.Inf(-1)}}, math.Inf(1), [][]float64{{0, math.NaN()}}},
		{"clipped", 1, [][]float64{{3, 4}}, 5, [][]float64{{3 / (5 + 1e-6), 4 / (5 + 1e-6)}}},
		{"several tensors", 6.5, [][]float64{{2, 4}, {4, 5, 6}, nil}, 9.848857801796104,
			[][]float64{{2 * 6.5 / (9.848857801796104 + 1e-6), 4 * 6.5 / (9.848857801796104 + 1e-6)},
				{4 * 6.5 / (9.848857801796104 + 1e-6), 5 * 6.5 / (9.848857801796104 + 1e-6), 6 * 6.5 / (9.848857801796104 + 1e-6)}, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps []*vram.Tensor
			for _, g := range tt.grads {
				if g == nil {
					ps = append(ps, vram.Zeros(vram.Shape{1}, vram.Float64, vram.WithGrad()))
					continue
				}
				p := vram.Zeros(vram.Shape{len(g)}, vram.Float64, vram.WithGrad())
				setGrad(p, g...)
				ps = append(ps, p)
			}
			if norm := optim.ClipGradNorm(ps, tt.maxNorm); !sameFloat(norm, tt.norm, 1e-12) {
				t.Fatalf("norm %v, want %v", norm, tt.norm)
			}
			for i, p := range ps {
				if tt.want[i] == nil {
					if p.Grad() != nil {
						t.Fatal("a gradient appeared")
					}
					continue
				}
				for j, g := range p.Grad().Float64s() {
					if !sameFloat(g, tt.want[i][j], 1e-12) {
						t.Fatalf("grad %d: %v, want %v", i, p.Grad().Float64s(), tt.want[i])
					}
				}
			}
		})
	}
	// Half precision: the norm of values whose squares overflow float16.
	p := vram.Zeros(vram.Shape{2}, vram.Float16, vram.WithGrad())
	setGrad(p, 300, 400)
	if norm := optim.ClipGradNorm([]*vram.Tensor{p}, 1000); norm != 500 {
		t.Fatalf("float16 norm %v, want 500", norm)
	}
	if err := vram.Catch(func() { optim.ClipGradNorm(nil, -1) }); !errors.Is(err, vram.ErrArgument) {
		t.Fatalf("negative max norm: %v", err)
	}
}

// TestMaximize checks that maximize steps as minimizing with the negated
// gradient does (PyTorch negates the gradient first), in a group of its
// own beside a group that minimizes.
func TestMaximize(t *testing.T) {
	tests := []struct {
		name  string
		make  func(max, min []*vram.Tensor) (releaser, error)
		plain func(ps []*vram.Tensor) (releaser, error)
	}{
		{"SGD", func(max, min []*vram.Tensor) (releaser, error) {
			return optim.NewSGDGroups([]optim.ParamGroup{optim.Group(max, optim.WithMaximize(true)), optim.Group(min)},
				optim.SGDConfig{LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 0.1})
		}, func(ps []*vram.Tensor) (releaser, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 0.1})
		}},
		{"Adam", func(max, min []*vram.Tensor) (releaser, error) {
			return optim.NewAdamGroups([]optim.ParamGroup{optim.Group(min), optim.Group(max, optim.WithMaximize(true))},
				optim.AdamConfig{LR: 0.1, WeightDecay: 0.1})
		}, func(ps []*vram.Tensor) (releaser, error) {
			return optim.NewAdam(ps, optim.AdamConfig{LR: 0.1, WeightDecay: 0.1})
		}},
		{"AdamW", func(max, min []*vram.Tensor) (releaser, error) {
			return optim.NewAdamW(append(max, min...), optim.AdamConfig{LR: 0.1, Maximize: true})
		}, func(ps []*vram.Tensor) (releaser, error) { return optim.NewAdamW(ps, optim.AdamConfig{LR: 0.1}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := vram.FromSlice([]float64{1, -2}, nil, vram.WithGrad())
			min := vram.FromSlice([]float64{1, -2}, nil, vram.WithGrad())
			ref := vram.FromSlice([]float64{1, -2}, nil, vram.WithGrad())
			o, err := tt.make([]*vram.Tensor{max}, []*vram.Tensor{min})
			if err != nil {
				t.Fatal(err)
			}
			defer o.Release()
			r, err := tt.plain([]*vram.Tensor{ref})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			ref2 := vram.FromSlice([]float64{1, -2}, nil, vram.WithGrad())
			r2, err := tt.plain([]*vram.Tensor{ref2})
			if err != nil {
				t.Fatal(err)
			}
			defer r2.Release()
			for _, g := range grads {
				setGrad(max, g...)
				setGrad(min, g...)
				setGrad(ref, -g[0], -g[1])
				setGrad(ref2, g...)
				o.Step()
				r.Step()
				r2.Step()
				checkValues(t, "maximized", max.Float64s(), ref.Float64s(), 1e-15)
				checkValues(t, "the gradient", max.Grad().Float64s(), g, 0) // left as it was
				if tt.name != "AdamW" {                                     // the group that minimizes
					checkValues(t, "minimized", min.Float64s(), ref2.Float64s(), 1e-15)
				}
			}
		})
	}
}

func TestClipGradNormWith(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name    string
		maxNorm float64
		opts    optim.ClipOptions
		grads   [][]float64
		norm    float64
		coef    float64 // the gradients are scaled by it; NaN with an error: nothing scaled
		kind    error
	}{
		{"L1", 3.5, optim.ClipOptions{NormType: 1}, [][]float64{{3, -4}, {1}}, 8, 3.5 / (8 + 1e-6), nil},
		{"L2", 2, optim.ClipOptions{}, [][]float64{{3, -4}, {12}}, 13, 2 / (13 + 1e-6), nil},
		{"L3", 100, optim.ClipOptions{NormType: 3}, [][]float64{{1, -2}, {2}}, math.Cbrt(17), 1, nil},
		{"Linf", 2, optim.ClipOptions{NormType: inf}, [][]float64{{3, -7}, {5}}, 7, 2 / (7 + 1e-6), nil},
		{"Linf below", 10, optim.ClipOptions{NormType: inf}, [][]float64{{3, -7}, {5}}, 7, 1, nil},
		{"NaN refused", 1, optim.ClipOptions{ErrorIfNonfinite: true}, [][]float64{{3, nan}, {1}}, nan, nan, vram.ErrArgument},
		{"Inf refused", 1, optim.ClipOptions{ErrorIfNonfinite: true}, [][]float64{{3, 1}, {-inf}}, inf, nan, vram.ErrArgument},
		{"Linf NaN refused", 1, optim.ClipOptions{NormType: inf, ErrorIfNonfinite: true}, [][]float64{{nan, 1}, {2}}, nan, nan, vram.ErrArgument},
		{"finite with the check", 1, optim.ClipOptions{ErrorIfNonfinite: true}, [][]float64{{3, -4}}, 5, 1 / (5 + 1e-6), nil},
		{"negative max norm", -1, optim.ClipOptions{}, [][]float64{{3, -4}}, 0, nan, vram.ErrArgument},
		{"L0.5", 1, optim.ClipOptions{NormType: 0.5}, [][]float64{{1, -4}}, 9, 1 / (9 + 1e-6), nil},
		// PyTorch's clip_grad_norm_ takes any norm type that
		// torch.linalg.vector_norm takes: negative ones, -inf, and 0,
		// which counts the tensors with a non-zero element.
		{"negative norm type", 1, optim.ClipOptions{NormType: -1}, [][]float64{{3, -4}}, 12.0 / 7, 1 / (12.0/7 + 1e-6), nil},
		{"negative norm type over a zero", 1, optim.ClipOptions{NormType: -1}, [][]float64{{3, 0}, {2}}, 0, 1, nil},
		{"-Inf norm type", 1, optim.ClipOptions{NormType: -inf}, [][]float64{{3, -4}, {-5}}, 3, 1 / (3 + 1e-6), nil},
		{"-Inf norm type below", 5, optim.ClipOptions{NormType: -inf}, [][]float64{{3, -4}, {-5}}, 3, 1, nil},
		{"zero norm type", 1, optim.ClipOptions{ZeroNormType: true}, [][]float64{{3, -4}, {0, 0}, {1}, {nan}}, 3, 1 / (3 + 1e-6), nil},
		{"zero norm type, all zero", 1, optim.ClipOptions{ZeroNormType: true}, [][]float64{{0}, {0, 0}}, 0, 1, nil},
		{"zero norm type with another", 1, optim.ClipOptions{NormType: 2, ZeroNormType: true}, [][]float64{{3, -4}}, 0, nan, vram.ErrArgument},
		{"Linf NaN clipped", 1, optim.ClipOptions{NormType: inf}, [][]float64{{2}, {nan, 1}, {3}}, nan, nan, nil},
		{"NaN norm type", 1, optim.ClipOptions{NormType: nan}, [][]float64{{3, -4}}, 0, nan, vram.ErrArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps []*vram.Tensor
			for _, g := range tt.grads {
				p := vram.Zeros(vram.Shape{len(g)}, vram.Float64, vram.WithGrad())
				setGrad(p, g...)
				ps = append(ps, p)
			}
			norm, err := optim.ClipGradNormWith(ps, tt.maxNorm, tt.opts)
			if !errors.Is(err, tt.kind) || (tt.kind == nil) != (err == nil) {
				t.Fatalf("error %v, want kind %v", err, tt.kind)
			}
			if !(math.Abs(norm-tt.norm) < 1e-12 || math.IsNaN(norm) && math.IsNaN(tt.norm) || norm == tt.norm) {
				t.Fatalf("norm %v, want %v", norm, tt.norm)
			}
			for i, p := range ps {
				want := make([]float64, len(tt.grads[i]))
				for j, g := range tt.grads[i] {
					want[j] = g
					if tt.kind == nil {
						want[j] = g * tt.coef
					}
				}
				got := p.Grad().Float64s()
				for j := range got {
					if !(math.Abs(got[j]-want[j]) <= 1e-12 || math.IsNaN(got[j]) && math.IsNaN(want[j]) || got[j] == want[j]) {
						t.Fatalf("gradient %d: %v, want %v", i, got, want)
					}
				}
			}
		})
	}
}

// sameFloat reports whether got is want within tol, NaN matching NaN and
// infinities matching themselves.
func sameFloat(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol || got == want || math.IsNaN(got) && math.IsNaN(want)
}

// TestGetTotalNorm checks torch.nn.utils.get_total_norm and
// clip_grads_with_norm_, the two halves of clip_grad_norm_, over tensors
// on the CPU and on simulated devices.
func TestGetTotalNorm(t *testing.T) {
	inf := math.Inf(1)
	sim0, sim1 := vram.MustParseDevice("sim:0"), vram.MustParseDevice("sim:1")
	tests := []struct {
		name string
		opts optim.ClipOptions
		vals [][]float64
		devs []vram.Option // the device, or a dtype other than float64
		norm float64
		kind error
	}{
		{"L2 across devices", optim.ClipOptions{}, [][]float64{{3}, {4}, {12}}, []vram.Option{vram.CPU, sim0, sim1}, 13, nil},
		{"L1 across devices", optim.ClipOptions{NormType: 1}, [][]float64{{3, -1}, {-4}}, []vram.Option{sim0, vram.CPU}, 8, nil},
		{"Linf", optim.ClipOptions{NormType: inf}, [][]float64{{3, -9}, {4}}, []vram.Option{sim1, sim0}, 9, nil},
		{"L4", optim.ClipOptions{NormType: 4}, [][]float64{{1, 1}, {-1, 1}}, []vram.Option{vram.CPU, vram.CPU}, math.Sqrt(2), nil},
		{"none", optim.ClipOptions{}, nil, nil, 0, nil},
		{"infinite refused", optim.ClipOptions{ErrorIfNonfinite: true}, [][]float64{{inf}}, []vram.Option{sim0}, inf, vram.ErrArgument},
		{"NaN norm type", optim.ClipOptions{NormType: math.NaN()}, [][]float64{{1}}, []vram.Option{vram.CPU}, 0, vram.ErrArgument},
		{"integers", optim.ClipOptions{}, [][]float64{{1}, {70000}}, []vram.Option{vram.CPU, vram.Int32}, 0, vram.ErrDType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := []*vram.Tensor{nil} // nil tensors are skipped
			for i, v := range tt.vals {
				ts = append(ts, vram.FromSlice(v, nil, vram.Float64, tt.devs[i]))
			}
			norm, err := optim.GetTotalNorm(ts, tt.opts)
			if !errors.Is(err, tt.kind) || (tt.kind == nil) != (err == nil) {
				t.Fatalf("error %v, want kind %v", err, tt.kind)
			}
			if !sameFloat(norm, tt.norm, 1e-12) {
				t.Fatalf("norm %v, want %v", norm, tt.norm)
			}
		})
	}

	// The norm taken over two models' gradients clips each model's.
	a := vram.Zeros(vram.Shape{2}, vram.Float64, vram.WithGrad())
	b := vram.Zeros(vram.Shape{1}, vram.Float64, sim0, vram.WithGrad())
	setGrad(a, 3, 4)
	b.SetGrad(vram.FromSlice([]float64{12}, nil, vram.Float64, sim0))
	norm, err := optim.GetTotalNorm([]*vram.Tensor{a.Grad(), b.Grad()}, optim.ClipOptions{})
	if err != nil || norm != 13 {
		t.Fatalf("norm %v, %v", norm, err)
	}
	if err := optim.ClipGradsWithNorm([]*vram.Tensor{a}, 1, norm); err != nil {
		t.Fatal(err)
	}
	checkValues(t, "clipped", a.Grad().Float64s(), []float64{3 / (13 + 1e-6), 4 / (13 + 1e-6)}, 1e-15)
	checkValues(t, "not passed", b.Grad().Float64s(), []float64{12}, 0)
	for _, bad := range [][2]float64{{-1, 1}, {math.NaN(), 1}, {1, -1}} {
		if err := optim.ClipGradsWithNorm([]*vram.Tensor{b}, bad[0], bad[1]); !errors.Is(err, vram.ErrArgument) {
			t.Fatalf("max %v, total %v: %v", bad[0], bad[1], err)
		}
	}
	checkValues(t, "refused", b.Grad().Float64s(), []float64{12}, 0)
}

func TestClipGradValue(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name  string
		clip  float64
		grads [][]float64 // nil: no gradient
		want  [][]float64
	}{
		{"clamped", 1.5, [][]float64{{3, -4, 0.5}, nil, {-1.5, 1.5}}, [][]float64{{1.5, -1.5, 0.5}, nil, {-1.5, 1.5}}},
		{"zero", 0, [][]float64{{3, -4}}, [][]float64{{0, 0}}},
		{"infinite inputs", 2, [][]float64{{math.Inf(1), math.Inf(-1)}}, [][]float64{{2, -2}}},
		{"NaN stays", 2, [][]float64{{nan, 5}}, [][]float64{{nan, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps []*vram.Tensor
			for _, g := range tt.grads {
				p := vram.Zeros(vram.Shape{max(len(g), 1)}, vram.Float32, vram.WithGrad())
				if g != nil {
					setGrad(p, g...)
				}
				ps = append(ps, p)
			}
			optim.ClipGradValue(append(ps, nil), tt.clip)
			for i, p := range ps {
				if tt.want[i] == nil {
					if p.Grad() != nil {
						t.Fatal("a gradient appeared")
					}
					continue
				}
				got := p.Grad().Float64s()
				for j, w := range tt.want[i] {
					if got[j] != w && !(math.IsNaN(w) && math.IsNaN(got[j])) {
						t.Fatalf("gradient %d: %v, want %v", i, got, tt.want[i])
					}
				}
			}
		})
	}
	for _, bad := range []float64{-1, nan} {
		if err := vram.Catch(func() { optim.ClipGradValue(nil, bad) }); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("clip value %v: %v", bad, err)
		}
	}
}

// TestAMSGrad checks Adam and AdamW with amsgrad against PyTorch's rule
// worked out in float64, with gradients that shrink so that the largest
// second moment estimate differs from the current one.
func TestAMSGrad(t *testing.T) {
	gs := [][]float64{{1, -2}, {0.01, 0.02}, {0.01, -0.5}, {-0.3, 0.02}}
	for _, decoupled := range []bool{false, true} {
		for _, dt := range []vram.DType{vram.Float64, vram.Float32} {
			name := map[bool]string{false: "Adam", true: "AdamW"}[decoupled] + "/" + dt.String()
			t.Run(name, func(t *testing.T) {
				const lr, b1, b2, eps, wd = 0.1, 0.9, 0.999, 1e-8, 0.1
				p := vram.FromSlice([]float64{1, -2}, nil, dt, vram.WithGrad())
				cfg := optim.AdamConfig{LR: lr, WeightDecay: wd, AMSGrad: true}
				newOpt := optim.NewAdam
				if decoupled {
					newOpt = optim.NewAdamW
				}
				o, err := newOpt([]*vram.Tensor{p}, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer o.Release()
				want := []float64{1, -2}
				m, v, vmax := make([]float64, 2), make([]float64, 2), make([]float64, 2)
				for step, g := range gs {
					setGrad(p, g...)
					o.Step()
					bc1 := 1 - math.Pow(b1, float64(step+1))
					bc2 := 1 - math.Pow(b2, float64(step+1))
					for j := range want {
						gj := g[j]
						if decoupled {
							want[j] *= 1 - lr*wd
						} else {
							gj += wd * want[j]
						}
						m[j] = b1*m[j] + (1-b1)*gj
						v[j] = b2*v[j] + (1-b2)*gj*gj
						vmax[j] = math.Max(vmax[j], v[j])
						want[j] -= lr / bc1 * m[j] / (math.Sqrt(vmax[j])/math.Sqrt(bc2) + eps)
					}
					tol := 1e-12
					if dt == vram.Float32 {
						tol = 1e-5
					}
					checkValues(t, "step", p.Float64s(), want, tol)
				}
			})
		}
	}
}
