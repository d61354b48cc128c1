package optim_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// TestNilOptimizers checks that a nil optimizer, and a nil pointer held as
// one (a "var opt *optim.SGD" left unset), is refused with an error
// matching vram.ErrArgument by Save, Load and the schedule constructors,
// and released as nothing by Release, rather than being dereferenced.
func TestNilOptimizers(t *testing.T) {
	dir := t.TempDir()
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	defer p.Release()
	good, err := optim.NewAdam([]*vram.Tensor{p}, optim.AdamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Release()
	path := filepath.Join(dir, "opt.safetensors")
	if err := optim.Save(good, path); err != nil {
		t.Fatal(err)
	}
	var sgd *optim.SGD
	var adam *optim.Adam
	for _, opt := range []optim.Optimizer{nil, sgd, adam} {
		for _, tc := range []struct {
			name string
			call func() error
			want error // what the error must match; nil for none
		}{
			{"Save", func() error { return optim.Save(opt, filepath.Join(dir, "out.safetensors")) }, vram.ErrArgument},
			{"Load", func() error { return optim.Load(opt, path) }, vram.ErrArgument},
			{"Release", func() error { optim.Release(opt); return nil }, nil},
			{"StepLR", func() error { _, err := optim.NewStepLR(opt, 2, 0.5); return err }, vram.ErrArgument},
			{"LambdaLR", func() error { _, err := optim.NewLambdaLR(opt, func(int) float64 { return 1 }); return err }, vram.ErrArgument},
			{"OneCycleLR", func() error { _, err := optim.NewOneCycleLR(opt, 0.1, 10, optim.OneCycleOptions{}); return err }, vram.ErrArgument},
			{"CyclicLR", func() error { _, err := optim.NewCyclicLR(opt, 0.01, 0.1, optim.CyclicOptions{}); return err }, vram.ErrArgument},
			{"SWALR", func() error { _, err := optim.NewSWALR(opt, []float64{0.05}, 2, true); return err }, vram.ErrArgument},
			{"SequentialLR", func() error { _, err := optim.NewSequentialLR(opt, nil, nil); return err }, vram.ErrArgument},
			{"ReduceLROnPlateau", func() error {
				_, err := optim.NewReduceLROnPlateau(opt, optim.DefaultPlateauConfig())
				return err
			}, vram.ErrArgument},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var err error
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%T: panicked with %v", opt, r)
					}
				}()
				if perr := vram.Catch(func() { err = tc.call() }); perr != nil {
					t.Fatalf("%T: panicked with %v", opt, perr)
				}
				if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
					t.Errorf("%T: got %v, want %v", opt, err, tc.want)
				}
			})
		}
	}
}
