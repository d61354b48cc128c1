package nn_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestLoadZeroTensor gives the functions that load and describe a model a
// zero Tensor (&vram.Tensor{}, made without a factory), as a value of a
// state dict or as a parameter of the model: Load and LoadStateDict
// return an error of kind ErrArgument, as they return every other error,
// rather than panic, and change nothing; Format names the tensor.
func TestLoadZeroTensor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	src := nn.NewLinear(2, 2)
	defer nn.Release(src)
	if err := nn.Save(src, path); err != nil {
		t.Fatal(err)
	}
	withZeroWeight := func() *nn.Linear {
		l := nn.NewLinear(2, 2)
		l.Weight.Release()
		l.Weight = &vram.Tensor{}
		return l
	}
	tests := []struct {
		name string
		mk   func() *nn.Linear
		load func(l *nn.Linear) error
	}{
		{"LoadStateDict of a zero Tensor", func() *nn.Linear { return nn.NewLinear(2, 2) }, func(l *nn.Linear) error {
			_, err := nn.LoadStateDict(l, map[string]*vram.Tensor{"weight": {}, "bias": src.Bias}, true)
			return err
		}},
		{"LoadStateDict into a zero Tensor", withZeroWeight, func(l *nn.Linear) error {
			_, err := nn.LoadStateDict(l, nn.StateDict(src), true)
			return err
		}},
		{"Load into a zero Tensor", withZeroWeight, func(l *nn.Linear) error { return nn.Load(l, path) }},
		{"LoadNonStrict into a zero Tensor", withZeroWeight, func(l *nn.Linear) error {
			_, err := nn.LoadNonStrict(l, path)
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.mk()
			defer l.Bias.Release()
			bias := l.Bias.Float64s()
			var err error
			if perr := vram.Catch(func() { err = tc.load(l) }); perr != nil {
				t.Fatalf("panicked with %v, want an error returned", perr)
			}
			if !errors.Is(err, vram.ErrArgument) {
				t.Errorf("got %v, want an error of kind ErrArgument", err)
			}
			if got := l.Bias.Float64s(); !slices.Equal(got, bias) {
				t.Errorf("the failed load changed the bias from %v to %v", bias, got)
			}
		})
	}
	l := withZeroWeight()
	defer l.Bias.Release()
	var s string
	if err := vram.Catch(func() { s = nn.Format(l) }); err != nil {
		t.Fatalf("Format panicked with %v", err)
	}
	if !strings.Contains(s, "weight <zero Tensor>") {
		t.Errorf("Format gave %q, want the weight named a zero Tensor", s)
	}
}
