package optim_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// TestLBFGSStateFollowsParameters moves the parameters of an LBFGS to
// another device between steps (model.To(dev)), or converts them to
// another dtype (model.Double()): its state (the last direction and
// gradient, the corrections kept) follows them at the next Step, as the
// other optimizers' state does, so that it steps as one made there;
// parameters split over devices are refused with vram.ErrDevice before
// the closure runs.
func TestLBFGSStateFollowsParameters(t *testing.T) {
	from := vram.Sim(1)
	for _, tt := range []struct {
		name  string
		to    vram.Device
		dtype vram.DType
	}{{"moved", vram.Sim(0), vram.Float32}, {"converted", from, vram.Float64}, {"moved and converted", vram.Sim(0), vram.Float64}} {
		for _, ls := range []string{"", "strong_wolfe"} {
			t.Run(tt.name+"/"+ls, func(t *testing.T) {
				newParams := func(d vram.Device) []*vram.Tensor {
					a := vram.FromSlice([]float32{1.5, -2, 0.5}, vram.Shape{3}, d, vram.WithGrad())
					b := vram.FromSlice([]float32{-1, 2}, vram.Shape{2}, d, vram.WithGrad())
					return []*vram.Tensor{vram.Keep(a), vram.Keep(b)}
				}
				ps := newParams(from)
				ref := newParams(from) // stepped without moving
				defer func() {
					for _, p := range append(ps, ref...) {
						p.Release()
					}
				}()
				cfg := optim.LBFGSConfig{LineSearch: ls, MaxIter: 2, HistorySize: 3}
				opt, err := optim.NewLBFGS(ps, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer opt.Release()
				refOpt, err := optim.NewLBFGS(ref, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer refOpt.Release()
				// A function whose minimum takes L-BFGS several steps.
				closure := func(opt *optim.LBFGS, ps []*vram.Tensor) func() float64 {
					return func() float64 {
						opt.ZeroGrad()
						var l float64
						vram.Tidy(func() {
							x, y := ps[0], ps[1]
							loss := x.Square().Square().Sum().Add(y.Square().MulScalar(3).Sum()).Add(x.Sum().Mul(y.Sum()))
							loss.Backward()
							l = loss.Item()
						})
						return l
					}
				}
				opt.Step(closure(opt, ps))
				refOpt.Step(closure(refOpt, ref))
				for _, p := range ps {
					p.MoveTo(tt.to)
					p.CastInPlace(tt.dtype)
				}
				if err := vram.Catch(func() { opt.Step(closure(opt, ps)) }); err != nil {
					t.Fatalf("Step after the parameters were %s: %v", tt.name, err)
				}
				// ref stays where it was: the same steps, in float32.
				refOpt.Step(closure(refOpt, ref))
				for i, p := range ps {
					if p.Device() != tt.to || p.DType() != tt.dtype {
						t.Fatalf("parameter %d is %s on %v", i, p.DType(), p.Device())
					}
					checkValues(t, "parameter after the second step", p.Float64s(), ref[i].Float64s(), 1e-5)
				}
			})
		}
	}

	// Parameters split over devices since: refused before the closure runs.
	ps := []*vram.Tensor{
		vram.Keep(vram.Ones(vram.Shape{2}, from, vram.WithGrad())),
		vram.Keep(vram.Ones(vram.Shape{2}, from, vram.WithGrad())),
	}
	defer func() {
		for _, p := range ps {
			p.Release()
		}
	}()
	opt, err := optim.NewLBFGS(ps, optim.LBFGSConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ps[1].MoveTo(vram.Sim(0))
	ran := false
	err = vram.Catch(func() { opt.Step(func() float64 { ran = true; return 0 }) })
	if !errors.Is(err, vram.ErrDevice) || ran {
		t.Fatalf("Step of parameters on two devices: %v (closure run: %v), want an error of kind ErrDevice before the closure", err, ran)
	}
}
