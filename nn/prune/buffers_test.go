package prune_test

import (
	"slices"
	"sort"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/prune"
)

// TestMasksAreBuffers checks that a pruning mask is a buffer, as
// PyTorch's weight_mask is: not among the parameters (so that parameter
// counts and optimizers made after pruning see weight_orig only), but in
// NamedBuffers and the state dict, and reached by To, ConvertDType,
// Replicate and Release.
func TestMasksAreBuffers(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(5))
	tests := []struct {
		name  string
		layer func() nn.Module
	}{
		{"linear", func() nn.Module { return nn.NewLinear(4, 3, g) }},
		{"conv2d", func() nn.Module { return nn.NewConv2d(2, 3, 3, nn.ConvOptions{}, g) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.layer()
			model := nn.NewSequential(l)
			defer nn.Release(model)
			params := model.Parameters()
			count := func() int {
				n := 0
				for _, p := range model.Parameters() {
					n += p.NumElements()
				}
				return n
			}
			before := count()
			if err := prune.L1Unstructured(l, "weight", prune.Fraction(0.5)); err != nil {
				t.Fatal(err)
			}
			if got := model.Parameters(); !slices.Equal(got, params) {
				t.Errorf("pruning changed the parameters: %d tensors, want the %d before", len(got), len(params))
			}
			if got := count(); got != before {
				t.Errorf("parameter count %d after pruning, want %d", got, before)
			}
			var bufs []string
			for _, b := range nn.NamedBuffers(model) {
				bufs = append(bufs, b.Name)
			}
			if want := []string{"0.weight_mask"}; !slices.Equal(bufs, want) {
				t.Errorf("buffers %v, want %v", bufs, want)
			}
			var keys []string
			for k := range nn.StateDict(model) {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if want := []string{"0.bias", "0.weight_mask", "0.weight_orig"}; !slices.Equal(keys, want) {
				t.Errorf("state dict keys %v, want %v", keys, want)
			}
			mask := nn.NamedBuffers(model)[0].Tensor

			model.To(vram.Sim(0))
			if mask.Device() != vram.Sim(0) {
				t.Errorf("To left the mask on %s", mask.Device())
			}
			rep, err := nn.Replicate(model, vram.CPU)
			if err != nil {
				t.Fatal(err)
			}
			rb := nn.NamedBuffers(rep)
			if len(rb) != 1 || rb[0].Tensor == mask || rb[0].Tensor.Device() != vram.CPU ||
				!slices.Equal(rb[0].Tensor.Float64s(), mask.Float64s()) {
				t.Errorf("the replica's buffers %v are not a copy of the mask on the CPU", rb)
			}
			nn.Release(rep)
			model.To(vram.CPU)

			model.Half()
			if mask.DType() != vram.Float16 {
				t.Errorf("Half left the mask %s", mask.DType())
			}
			nn.ConvertDType(model, vram.Float32)
			if mask.DType() != vram.Float32 {
				t.Errorf("ConvertDType left the mask %s", mask.DType())
			}

			if err := prune.Remove(l, "weight"); err != nil {
				t.Fatal(err)
			}
			if !mask.Released() || len(nn.NamedBuffers(model)) != 0 {
				t.Errorf("Remove left the mask (released %v) or its buffer (%d buffers)", mask.Released(), len(nn.NamedBuffers(model)))
			}
			if err := prune.L1Unstructured(l, "bias", prune.Count(1)); err != nil {
				t.Fatal(err)
			}
			bm := nn.NamedBuffers(model)[0].Tensor
			nn.Release(model)
			if !bm.Released() {
				t.Error("nn.Release left the mask")
			}
		})
	}
}
