package nn_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestTypedNilModules checks that a nil pointer held as an nn.Module (a
// *nn.Linear or a caller's own type left unset) is taken for the nil
// module it is by every function of the package that takes a module: a
// function that accepts nil does what it does for nil, one that refuses
// nil returns or panics with its error, and none dereferences it.
func TestTypedNilModules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := nn.Save(nn.NewLinear(2, 2), path); err != nil {
		t.Fatal(err)
	}
	var lin *nn.Linear
	var seq *nn.Sequential
	for _, m := range []nn.Module{lin, seq} {
		for _, tc := range []struct {
			name string
			call func() error // its error, or nil when it must succeed
			want error        // what the error or panic must match; nil for none
		}{
			{"Apply", func() error { nn.Apply(m, func(nn.Module) { t.Error("fn called") }); return nil }, nil},
			{"SetRequiresGrad", func() error { nn.SetRequiresGrad(m, false); return nil }, nil},
			{"ZeroGrad", func() error { nn.ZeroGrad(m); return nil }, nil},
			{"NumParameters", func() error {
				if n, k := nn.NumParameters(m); n != 0 || k != 0 {
					t.Errorf("NumParameters: %d, %d", n, k)
				}
				return nil
			}, nil},
			{"NamedModules", func() error {
				if got := nn.NamedModules(m); got != nil {
					t.Errorf("NamedModules: %v", got)
				}
				return nil
			}, nil},
			{"Modules", func() error { nn.Modules(m); return nil }, nil},
			{"NamedBuffers", func() error { nn.NamedBuffers(m); return nil }, nil},
			{"StateDict", func() error { nn.StateDict(m); return nil }, nil},
			{"ConvertDType", func() error { nn.ConvertDType(m, vram.Float16); return nil }, nil},
			{"ToMemoryFormat", func() error { nn.ToMemoryFormat(m, vram.ChannelsLast); return nil }, nil},
			{"Release", func() error { nn.Release(m); return nil }, nil},
			{"Format", func() error { nn.Format(m); return nil }, nil},
			{"Checkpoint", func() error { nn.Checkpoint(m); return nil }, vram.ErrArgument},
			{"Save", func() error { return nn.Save(m, path) }, vram.ErrArgument},
			{"Load", func() error { return nn.Load(m, path) }, vram.ErrArgument},
			{"LoadStateDict", func() error { _, err := nn.LoadStateDict(m, nil, true); return err }, vram.ErrArgument},
			{"Replicate", func() error { _, err := nn.Replicate(m, vram.CPU); return err }, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var err error
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%T(nil): panicked with %v", m, r)
					}
				}()
				if perr := vram.Catch(func() { err = tc.call() }); perr != nil {
					err = perr
				}
				switch {
				case tc.want != nil && !errors.Is(err, tc.want):
					t.Errorf("%T(nil): got %v, want an error matching %v", m, err, tc.want)
				case tc.want == nil && tc.name != "Replicate" && err != nil:
					t.Errorf("%T(nil): %v", m, err)
				case tc.name == "Replicate" && err == nil:
					t.Errorf("%T(nil): no error", m)
				}
			})
		}
	}
}
