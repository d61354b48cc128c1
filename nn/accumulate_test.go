package nn_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

func TestAccumulateMatchesOneBatch(t *testing.T) {
	const batch = 12
	xs := vram.Randn(vram.Shape{batch, 6}, vram.WithGenerator(vram.NewGenerator(1)))
	defer xs.Release()
	ys := vram.Randn(vram.Shape{batch, 3}, vram.WithGenerator(vram.NewGenerator(2)))
	defer ys.Release()
	model := func() *nn.Sequential {
		g := vram.NewGenerator(11)
		return nn.NewSequential(nn.NewLinear(6, 16, vram.WithGenerator(g)), nn.NewReLU(), nn.NewLinear(16, 3, vram.WithGenerator(g)))
	}
	grads := func(m nn.Module) [][]float64 {
		var out [][]float64
		for _, p := range m.Parameters() {
			out = append(out, p.Grad().Float64s())
		}
		return out
	}
	ref := model()
	defer nn.Release(ref)
	var wantLoss float64
	vram.Tidy(func() {
		l := nn.MSELoss(ref.Forward(xs), ys)
		wantLoss = l.Item()
		l.Backward()
	})
	want := grads(ref)
	for _, k := range []int{1, 2, 3, 4, 6, 12} {
		m := model()
		got, err := nn.Accumulate(k, nil, func(micro int) *vram.Tensor {
			n := batch / k
			return nn.MSELoss(m.Forward(xs.Narrow(0, micro*n, n)), ys.Narrow(0, micro*n, n))
		})
		if err != nil {
			t.Fatal(err)
		}
		if !near(got, wantLoss, 1e-5) {
			t.Errorf("%d micro-batches: mean loss %v, want %v", k, got, wantLoss)
		}
		for i, g := range grads(m) {
			checkValues(t, "gradient", g, want[i], 1e-5)
		}
		nn.Release(m)
	}
}

func TestAccumulateRejects(t *testing.T) {
	one := func(int) *vram.Tensor { return vram.Scalar(1.0) }
	w := vram.Ones(vram.Shape{2, 3}, vram.WithGrad())
	defer w.Release()
	tests := []struct {
		name string
		call func()
		kind error
	}{
		{"zero steps", func() { nn.Accumulate(0, nil, one) }, vram.ErrArgument},
		{"negative steps", func() { nn.Accumulate(-3, nil, one) }, vram.ErrArgument},
		{"nil loss", func() { nn.Accumulate(2, nil, nil) }, vram.ErrArgument},
		{"loss returns nil", func() { nn.Accumulate(2, nil, func(int) *vram.Tensor { return nil }) }, vram.ErrArgument},
		{"loss of several elements", func() { nn.Accumulate(2, nil, func(int) *vram.Tensor { return w.MulScalar(2) }) }, vram.ErrShape},
		{"loss of no elements", func() {
			nn.Accumulate(2, nil, func(int) *vram.Tensor { return w.Narrow(0, 0, 0).MulScalar(2) })
		}, vram.ErrShape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := vram.Catch(tt.call)
			var ve *vram.Error
			if !errors.Is(err, tt.kind) || !errors.As(err, &ve) || ve.Op != "accumulate" {
				t.Fatalf("got %v, want an error of accumulate matching %v", err, tt.kind)
			}
			if g := w.Grad(); g != nil {
				t.Errorf("a gradient was accumulated: %v", g.Float64s())
				w.ZeroGrad()
			}
		})
	}
}

// countingSyncer is an nn.Syncer that counts its calls in its own fields,
// as parallel.DistributedDataParallel keeps its state.
type countingSyncer struct{ noSyncs, backwards int }

func (s *countingSyncer) NoSync(fn func()) { s.noSyncs++; fn() }

func (s *countingSyncer) Backward(loss *vram.Tensor, opts ...vram.BackwardOption) error {
	s.backwards++
	loss.Backward(opts...)
	return nil
}

// TestAccumulateNilSyncer: a nil pointer given as ddp (a "var ddp
// *parallel.DistributedDataParallel" left unset on a single process) is no
// ddp, as nil is, rather than a receiver to dereference.
func TestAccumulateNilSyncer(t *testing.T) {
	x := vram.Ones(vram.Shape{2, 3})
	defer x.Release()
	var none *countingSyncer
	for _, ddp := range []nn.Syncer{nil, none, &countingSyncer{}} {
		lin := nn.NewLinear(3, 1, vram.WithGenerator(vram.NewGenerator(1)))
		var loss float64
		var err error
		if p := vram.Catch(func() {
			loss, err = nn.Accumulate(2, ddp, func(int) *vram.Tensor { return lin.Forward(x).Sum() })
		}); p != nil || err != nil {
			t.Fatalf("%T: %v, %v", ddp, p, err)
		}
		if g := lin.Parameters()[0].Grad().Float64s(); g[0] != 2 || loss == 0 {
			t.Errorf("%T: gradient %v, loss %v", ddp, g, loss)
		}
		if s, ok := ddp.(*countingSyncer); ok && s != nil && (s.noSyncs != 1 || s.backwards != 2) {
			t.Errorf("%d NoSync and %d Backward calls, want 1 and 2", s.noSyncs, s.backwards)
		}
		nn.Release(lin)
	}
}
