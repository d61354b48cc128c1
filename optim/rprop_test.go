package optim_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// refRprop runs n steps of torch.optim.Rprop's update rule in float64,
// element by element as its single-tensor step does.
func refRprop(c optim.RpropConfig, n int) [][]float64 {
	p := append([]float64(nil), refInit...)
	prev := make([]float64, len(p))
	size := make([]float64, len(p))
	for i := range size {
		size[i] = c.LR
	}
	var out [][]float64
	for t := 1; t <= n; t++ {
		g := refGrad(p, t)
		for i := range p {
			d := g[i]
			if c.Maximize {
				d = -d
			}
			f := 1.0
			switch s := d * prev[i]; {
			case s > 0:
				f = c.EtaPlus
			case s < 0:
				f = c.EtaMinus
				d = 0
			}
			size[i] = math.Min(math.Max(size[i]*f, c.StepSizeMin), c.StepSizeMax)
			switch {
			case d > 0:
				p[i] -= size[i]
			case d < 0:
				p[i] += size[i]
			}
			prev[i] = d
		}
		out = append(out, append([]float64(nil), p...))
	}
	return out
}

func rpropCases() []refCase {
	var cases []refCase
	for i, c := range []optim.RpropConfig{
		{LR: 1e-2, EtaMinus: 0.5, EtaPlus: 1.2, StepSizeMin: 1e-6, StepSizeMax: 50},
		{LR: 0.05, EtaMinus: 0.3, EtaPlus: 1.5, StepSizeMin: 0.01, StepSizeMax: 0.08},
		{LR: 0.02, EtaMinus: 0.5, EtaPlus: 1.2, StepSizeMin: 0, StepSizeMax: 1e3, Maximize: true},
	} {
		cases = append(cases, refCase{fmt.Sprintf("Rprop%d", i),
			func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewRprop(ps, c) },
			func(n int) [][]float64 { return refRprop(c, n) }})
	}
	return cases
}

// TestRpropByHand checks two steps of Rprop worked out by hand: the step
// size grows where the gradient keeps its sign, and where it flips the
// step size shrinks and the element stays.
func TestRpropByHand(t *testing.T) {
	p := vram.FromSlice([]float64{1, -2, 3}, nil, vram.WithGrad())
	o, err := optim.NewRprop([]*vram.Tensor{p}, optim.RpropConfig{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	steps := []struct {
		grad, want []float64
	}{
		{[]float64{0.5, -1, 0}, []float64{0.9, -1.9, 3}},     // step sizes stay 0.1
		{[]float64{2, 1, -1}, []float64{0.78, -1.9, 3.1}},    // 0.12; 0.05 and no step; 0.1
		{[]float64{1, 1, -1}, []float64{0.636, -1.95, 3.22}}, // 0.144; 0.05 (prev was 0); 0.12
	}
	for i, s := range steps {
		setGrad(p, s.grad...)
		o.Step()
		checkValues(t, fmt.Sprintf("step %d", i+1), p.Float64s(), s.want, 1e-12)
	}
}

// TestRpropNaNGradient checks torch.optim.Rprop's handling of a NaN
// gradient element: its sign is 0, so the element does not move and its
// step size is kept, and the steps after it go on as from a zero gradient,
// while the other elements step as usual.
func TestRpropNaNGradient(t *testing.T) {
	nan := math.NaN()
	p := vram.FromSlice([]float64{1, -2}, nil, vram.WithGrad())
	o, err := optim.NewRprop([]*vram.Tensor{p}, optim.RpropConfig{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	steps := []struct {
		name       string
		grad, want []float64
	}{
		{"NaN first", []float64{nan, 1}, []float64{1, -2.1}},
		{"after NaN", []float64{1, 1}, []float64{0.9, -2.22}}, // 0.1 kept; 0.12
		{"NaN later", []float64{nan, 1}, []float64{0.9, -2.364}},
	}
	for _, s := range steps {
		setGrad(p, s.grad...)
		o.Step()
		checkValues(t, s.name, p.Float64s(), s.want, 1e-12)
	}
}

func TestRpropRefusesBadConfigs(t *testing.T) {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	defer p.Release()
	ps := []*vram.Tensor{p}
	tests := []struct {
		name string
		cfg  optim.RpropConfig
		opts []optim.Option
		want string
	}{
		{"negative lr", optim.RpropConfig{LR: -1}, nil, "learning rate"},
		{"NaN lr", optim.RpropConfig{LR: math.NaN()}, nil, "learning rate"},
		{"eta minus 1", optim.RpropConfig{EtaMinus: 1}, nil, "etas"},
		{"negative eta minus", optim.RpropConfig{EtaMinus: -0.5}, nil, "etas"},
		{"eta plus below 1", optim.RpropConfig{EtaPlus: 0.9}, nil, "etas"},
		{"infinite eta plus", optim.RpropConfig{EtaPlus: math.Inf(1)}, nil, "etas"},
		{"NaN eta in a group", optim.RpropConfig{}, []optim.Option{optim.WithEtas(math.NaN(), 1.2)}, "etas"},
		{"negative smallest step", optim.RpropConfig{StepSizeMin: -1}, nil, "step sizes"},
		{"smallest above largest", optim.RpropConfig{StepSizeMin: 2, StepSizeMax: 1}, nil, "step sizes"},
		{"infinite largest step", optim.RpropConfig{StepSizeMax: math.Inf(1)}, nil, "step sizes"},
		{"NaN largest step in a group", optim.RpropConfig{}, []optim.Option{optim.WithStepSizes(0, math.NaN())}, "step sizes"},
		{"momentum option", optim.RpropConfig{}, []optim.Option{optim.WithMomentum(0.9)}, "no hyper-parameter"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := optim.NewRpropGroups([]optim.ParamGroup{optim.Group(ps, tc.opts...)}, tc.cfg)
			if err == nil || o != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, %v; want an error about %q", o, err, tc.want)
			}
			if !errors.Is(err, vram.ErrArgument) {
				t.Errorf("error %v does not match vram.ErrArgument", err)
			}
		})
	}
}

// TestRpropCheckpointGroups checks that Save and Load keep the etas and
// step sizes of each group.
func TestRpropCheckpointGroups(t *testing.T) {
	mk := func() (*optim.Rprop, []*vram.Tensor) {
		ps := []*vram.Tensor{vram.FromSlice([]float64{1, 2}, nil, vram.WithGrad()), vram.FromSlice([]float64{3}, nil, vram.WithGrad())}
		o, err := optim.NewRpropGroups([]optim.ParamGroup{optim.Group(ps[:1]),
			optim.Group(ps[1:], optim.WithEtas(0.25, 2), optim.WithStepSizes(0.01, 0.5))}, optim.RpropConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return o, ps
	}
	o, ps := mk()
	defer o.Release()
	setGrad(ps[0], 1, -1)
	setGrad(ps[1], 1)
	o.Step()
	path := filepath.Join(t.TempDir(), "rprop.safetensors")
	if err := optim.Save(o, path); err != nil {
		t.Fatal(err)
	}
	o2, _ := mk()
	defer o2.Release()
	o2.SetGroupLR(0, 0.5)
	if err := optim.Load(o2, path); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if got, want := o2.GroupConfig(i), o.GroupConfig(i); got != want {
			t.Errorf("group %d: loaded %+v, saved %+v", i, got, want)
		}
	}
}

// Rprop steps along the sign of the gradient by a step size that grows by
// eta_plus (1.2) while the sign holds: from p = 1 with a constant
// gradient and lr 0.1, the steps are 0.1, 0.12, 0.144.
func ExampleRprop() {
	p := vram.FromSlice([]float64{1}, nil, vram.WithGrad())
	defer p.Release()
	opt, err := optim.NewRprop([]*vram.Tensor{p}, optim.RpropConfig{LR: 0.1})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	for range 3 {
		p.SetGrad(vram.FromSlice([]float64{5}, nil))
		opt.Step()
		fmt.Printf("p = %.3f\n", p.Item())
	}
	// Output:
	// p = 0.900
	// p = 0.780
	// p = 0.636
}
