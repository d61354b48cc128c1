package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestLayerSettingsChangedSinceConstruction sets a layer's setting after
// construction to what its constructor refuses (a NaN slope, a CELU alpha
// of 0, a negative GroupNorm eps, ...): Forward refuses it too, with an
// *vram.Error of kind ErrArgument, rather than return NaN or infinities.
func TestLayerSettingsChangedSinceConstruction(t *testing.T) {
	nan := math.NaN()
	x := vram.Randn(vram.Shape{2, 4, 3}, vram.WithGenerator(vram.NewGenerator(1)))
	defer x.Release()
	tests := []struct {
		name string
		mk   func() nn.Module
	}{
		{"LeakyReLU NaN slope", func() nn.Module { l := nn.NewLeakyReLU(0.01); l.NegativeSlope = nan; return l }},
		{"ELU NaN alpha", func() nn.Module { l := nn.NewELU(1); l.Alpha = nan; return l }},
		{"CELU alpha 0", func() nn.Module { l := nn.NewCELU(1); l.Alpha = 0; return l }},
		{"CELU NaN alpha", func() nn.Module { l := nn.NewCELU(1); l.Alpha = nan; return l }},
		{"CELU infinite alpha", func() nn.Module { l := nn.NewCELU(1); l.Alpha = math.Inf(1); return l }},
		{"Hardshrink NaN lambda", func() nn.Module { l := nn.NewHardshrink(0.5); l.Lambda = nan; return l }},
		{"Softshrink NaN lambda", func() nn.Module { l := nn.NewSoftshrink(0.5); l.Lambda = nan; return l }},
		{"Softshrink negative lambda", func() nn.Module { l := nn.NewSoftshrink(0.5); l.Lambda = -1; return l }},
		{"Threshold NaN threshold", func() nn.Module { l := nn.NewThreshold(0.1, 0); l.Threshold = nan; return l }},
		{"Threshold NaN value", func() nn.Module { l := nn.NewThreshold(0.1, 0); l.Value = nan; return l }},
		{"LocalResponseNorm size 0", func() nn.Module { l := nn.NewLocalResponseNorm(2, 1e-4, 0.75, 1); l.Size = 0; return l }},
		{"LocalResponseNorm NaN alpha", func() nn.Module { l := nn.NewLocalResponseNorm(2, 1e-4, 0.75, 1); l.Alpha = nan; return l }},
		{"LocalResponseNorm NaN beta", func() nn.Module { l := nn.NewLocalResponseNorm(2, 1e-4, 0.75, 1); l.Beta = nan; return l }},
		{"LocalResponseNorm infinite k", func() nn.Module { l := nn.NewLocalResponseNorm(2, 1e-4, 0.75, 1); l.K = math.Inf(1); return l }},
		{"GroupNorm negative eps", func() nn.Module { l := nn.NewGroupNorm(2, 4, 1e-5); l.Eps = -1; return l }},
		{"GroupNorm NaN eps", func() nn.Module { l := nn.NewGroupNorm(2, 4, 1e-5); l.Eps = nan; return l }},
		{"BatchNorm1d infinite eps", func() nn.Module { l := nn.NewBatchNorm1d(4); l.Eps = math.Inf(1); return l }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.mk()
			defer nn.Release(l)
			if err := vram.Catch(func() { l.Forward(x).Release() }); !errors.Is(err, vram.ErrArgument) {
				t.Errorf("got %v, want an error of kind ErrArgument", err)
			}
		})
	}
}
