package swa_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim/swa"
)

// checkClose fails unless got and want agree to tol relative.
func checkClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		if !(math.Abs(got[i]-want[i]) <= tol*(1+math.Abs(want[i]))) {
			t.Fatalf("%s: got %v, want %v (element %d)", what, got, want, i)
		}
	}
}

// setValues gives each parameter of m new values drawn from step.
func setValues(m nn.Module, step int) {
	vram.NoGrad(func() {
		for k, p := range m.Parameters() {
			vals := make([]float64, p.NumElements())
			for i := range vals {
				vals[i] = math.Sin(float64(3*step+5*k+i)) + 0.1*float64(step)
			}
			src := vram.FromSlice(vals, p.Shape(), vram.Float64)
			p.CopyFrom(src)
			src.Release()
		}
	})
}

func TestAveragedModelAverages(t *testing.T) {
	ema := func(decay float64) func(avg, cur float64, n int) float64 {
		return func(avg, cur float64, _ int) float64 { return avg + (1-decay)*(cur-avg) }
	}
	tests := []struct {
		name string
		opts swa.Options
		rule func(avg, cur float64, n int) float64 // the update after the first
	}{
		{"SWA", swa.Options{}, func(avg, cur float64, n int) float64 { return avg + (cur-avg)/float64(n+1) }},
		{"EMA", swa.Options{MultiAvgFunc: swa.EMA(0.9)}, ema(0.9)},
		{"avg_fn", swa.Options{AvgFunc: func(a, c *vram.Tensor, n int64) *vram.Tensor {
			return a.MulScalar(0.5).Add(c.MulScalar(0.5))
		}}, func(avg, cur float64, _ int) float64 { return 0.5*avg + 0.5*cur }},
		{"sim", swa.Options{Device: vram.Sim(0)}, func(avg, cur float64, n int) float64 { return avg + (cur-avg)/float64(n+1) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			model := nn.NewSequential(nn.NewLinear(3, 2, vram.Float64), nn.NewLinear(2, 1, vram.Float64))
			defer nn.Release(model)
			avg, err := swa.NewAveragedModel(model, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(avg)
			var want [][]float64
			for step := 0; step < 6; step++ {
				setValues(model, step)
				for k, p := range model.Parameters() {
					cur := p.Float64s()
					if step == 0 {
						want = append(want, cur)
						continue
					}
					for i := range cur {
						want[k][i] = tc.rule(want[k][i], cur[i], step)
					}
				}
				if err := avg.UpdateParameters(model); err != nil {
					t.Fatal(err)
				}
				if got := avg.NumAveraged(); got != int64(step+1) {
					t.Fatalf("n_averaged %d after %d updates", got, step+1)
				}
				for k, p := range avg.Parameters() {
					checkClose(t, fmt.Sprintf("parameter %d after update %d", k, step+1), p.Float64s(), want[k], 1e-12)
				}
			}
			if tc.opts.Device != (vram.Device{}) && avg.Parameters()[0].Device() != tc.opts.Device {
				t.Errorf("averaged copy on %v, want %v", avg.Parameters()[0].Device(), tc.opts.Device)
			}
			x := vram.FromSlice([]float64{1, 2, 3}, vram.Shape{1, 3}, vram.Float64, avg.Parameters()[0].Device())
			defer x.Release()
			y := avg.Forward(x)
			defer y.Release()
			if y.Shape()[1] != 1 {
				t.Errorf("forward shape %v", y.Shape())
			}
		})
	}
}

// TestAveragedModelNamesAndBuffers checks PyTorch's state-dict names and
// the handling of buffers with and without UseBuffers.
func TestAveragedModelNamesAndBuffers(t *testing.T) {
	for _, useBuffers := range []bool{false, true} {
		t.Run(fmt.Sprintf("use_buffers=%v", useBuffers), func(t *testing.T) {
			model := nn.NewSequential(nn.NewLinear(2, 3), nn.NewBatchNorm1d(3))
			defer nn.Release(model)
			avg, err := swa.NewAveragedModel(model, swa.Options{UseBuffers: useBuffers})
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(avg)
			if got := avg.NamedParameters()[0].Name; got != "module.0.weight" {
				t.Errorf("first parameter named %q, want module.0.weight", got)
			}
			names := map[string]bool{}
			for _, b := range nn.NamedBuffers(avg) {
				names[b.Name] = true
			}
			for _, n := range []string{"n_averaged", "module.1.running_mean", "module.1.num_batches_tracked"} {
				if !names[n] {
					t.Errorf("no buffer %q among %v", n, names)
				}
			}
			bn := model.NamedChildren()[1].Module.(*nn.BatchNorm1d)
			means := [][]float32{{1, 2, 3}, {3, 2, 1}}
			for i, m := range means {
				vram.NoGrad(func() {
					src := vram.FromSlice(m, vram.Shape{3})
					bn.RunningMean.CopyFrom(src)
					src.Release()
					bn.NumBatchesTracked.FillInPlace(float64(10 * (i + 1)))
				})
				if err := avg.UpdateParameters(model); err != nil {
					t.Fatal(err)
				}
			}
			abn := avg.Module().NamedChildren()[1].Module.(*nn.BatchNorm1d)
			want := []float64{3, 2, 1}
			if useBuffers {
				want = []float64{2, 2, 2}
			}
			checkClose(t, "running mean", abn.RunningMean.Float64s(), want, 1e-6)
			if got := abn.NumBatchesTracked.Item(); got != 20 {
				t.Errorf("num_batches_tracked %v, want 20 (copied)", got)
			}
		})
	}
}

func TestAveragedModelRefusesMismatches(t *testing.T) {
	model := nn.NewLinear(3, 2)
	defer nn.Release(model)
	avg, err := swa.NewAveragedModel(model, swa.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer nn.Release(avg)
	if err := avg.UpdateParameters(model); err != nil {
		t.Fatal(err)
	}
	before := avg.Parameters()[0].Float64s()
	other := nn.NewLinear(3, 4)
	defer nn.Release(other)
	released := nn.NewLinear(3, 2)
	nn.Release(released)
	tests := []struct {
		name  string
		model nn.Module
		kind  error
	}{
		{"nil", nil, vram.ErrArgument},
		{"nil pointer", (*nn.Linear)(nil), vram.ErrArgument},
		{"other shapes", other, vram.ErrArgument},
		{"other count", nn.NewSequential(nn.NewLinear(3, 2), nn.NewLinear(2, 2)), vram.ErrArgument},
		{"released", released, vram.ErrReleased},
	}
	for _, tc := range tests {
		var err error
		if p := vram.Catch(func() { err = avg.UpdateParameters(tc.model) }); p != nil {
			err = p
		}
		if !errors.Is(err, tc.kind) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.kind)
		}
	}
	checkClose(t, "average after refusals", avg.Parameters()[0].Float64s(), before, 0)
	if avg.NumAveraged() != 1 {
		t.Errorf("n_averaged %d after refusals, want 1", avg.NumAveraged())
	}
	for _, m := range []nn.Module{nil, (*nn.Sequential)(nil)} {
		var err error
		if p := vram.Catch(func() { _, err = swa.NewAveragedModel(m, swa.Options{}) }); p != nil {
			err = p
		}
		if !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%T model: got %v", m, err)
		}
	}
	if err := vram.Catch(func() { swa.EMA(1.5) }); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("EMA(1.5): got %v", err)
	}
}

// TestUpdateBN checks that UpdateBN makes the running statistics the
// equal average of the batches' statistics and restores the settings.
func TestUpdateBN(t *testing.T) {
	const n, c, bs = 12, 2, 4
	xs := make([]float32, n*c)
	for i := range xs {
		xs[i] = float32(math.Sin(float64(7*i)) * float64(1+i%3))
	}
	x := vram.FromSlice(xs, vram.Shape{n, c})
	ds, err := data.NewTensorDataset(x)
	if err != nil {
		t.Fatal(err)
	}
	loader, err := data.NewLoader(ds, bs, data.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bn := nn.NewBatchNorm1d(c)
	model := nn.NewSequential(bn)
	defer nn.Release(model)
	model.Eval()
	vram.NoGrad(func() { bn.RunningMean.FillInPlace(5) })
	if err := swa.UpdateBN(loader.All(), model); err != nil {
		t.Fatal(err)
	}
	wantMean, wantVar := make([]float64, c), make([]float64, c)
	for b := 0; b < n/bs; b++ {
		for j := 0; j < c; j++ {
			var s, ss float64
			for i := b * bs; i < (b+1)*bs; i++ {
				s += float64(xs[i*c+j])
			}
			m := s / bs
			for i := b * bs; i < (b+1)*bs; i++ {
				d := float64(xs[i*c+j]) - m
				ss += d * d
			}
			wantMean[j] += m / (n / bs)
			wantVar[j] += ss / (bs - 1) / (n / bs)
		}
	}
	checkClose(t, "running mean", bn.RunningMean.Float64s(), wantMean, 1e-5)
	checkClose(t, "running var", bn.RunningVar.Float64s(), wantVar, 1e-5)
	if model.Training() || bn.CumulativeAverage || bn.Momentum != 0.1 {
		t.Errorf("settings not restored: training %v, cumulative %v, momentum %v", model.Training(), bn.CumulativeAverage, bn.Momentum)
	}
}

// TestAveragedModelReleasesWhatItMakes checks that updates leave nothing
// behind and that nn.Release frees the copy.
func TestAveragedModelReleasesWhatItMakes(t *testing.T) {
	for _, d := range []vram.Device{vram.CPU, vram.Sim(1)} {
		memtest.Settle(d)
		before, allocated := vram.Storage(d), vram.MemoryAllocated(d)
		model := nn.NewSequential(nn.NewLinear(3, 2, d), nn.NewBatchNorm1d(2, d))
		for _, o := range []swa.Options{{}, {MultiAvgFunc: swa.EMA(0.5), UseBuffers: true}} {
			avg, err := swa.NewAveragedModel(model, o)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if err := avg.UpdateParameters(model); err != nil {
					t.Fatal(err)
				}
			}
			nn.Release(avg)
		}
		nn.Release(model)
		after := vram.Storage(d)
		if after.LiveBytes != before.LiveBytes || after.Leaked != before.Leaked || vram.MemoryAllocated(d) != allocated {
			t.Errorf("%s: %d storages made, %d freed, %d left to the collector", d, after.Allocs-before.Allocs, after.Frees-before.Frees, after.Leaked-before.Leaked)
		}
	}
}

// TestUpdateBNRefusesNil checks that a nil loader or model is an error of
// kind vram.ErrArgument that leaves the statistics alone.
func TestUpdateBNRefusesNil(t *testing.T) {
	bn := nn.NewBatchNorm1d(2)
	model := nn.NewSequential(bn)
	defer nn.Release(model)
	vram.NoGrad(func() { bn.RunningMean.FillInPlace(5) })
	empty := func(yield func(*data.Batch, error) bool) {}
	for name, call := range map[string]func() error{
		"nil loader":  func() error { return swa.UpdateBN(nil, model) },
		"nil model":   func() error { return swa.UpdateBN(empty, nil) },
		"nil pointer": func() error { return swa.UpdateBN(empty, (*nn.Sequential)(nil)) },
	} {
		var err error
		if p := vram.Catch(func() { err = call() }); p != nil {
			t.Errorf("%s: panicked: %v", name, p)
			continue
		}
		if !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%s: got %v, want an error matching vram.ErrArgument", name, err)
		}
	}
	checkClose(t, "running mean", bn.RunningMean.Float64s(), []float64{5, 5}, 0)
}
