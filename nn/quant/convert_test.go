package quant_test

import (
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/quant"
)

// TestConvertKeepsQuantizedBuffers converts quantized models to 16 bits:
// a quantized layer's scale and bias keep their dtype, as documented,
// while the float buffers of other layers follow the conversion; a
// replica of the quantized model keeps them too.
func TestConvertKeepsQuantizedBuffers(t *testing.T) {
	tests := []struct {
		name    string
		convert func(nn.Module) nn.Module
	}{
		{"Half", func(m nn.Module) nn.Module { m.(*nn.Sequential).Half(); return m }},
		{"ConvertDType", func(m nn.Module) nn.Module { nn.ConvertDType(m, vram.BFloat16); return m }},
		{"Linear.Half", func(m nn.Module) nn.Module { m.(*nn.Sequential).At(0).(*nn.Linear).Half(); return m }},
		{"replica Half", func(m nn.Module) nn.Module {
			r, err := nn.Replicate(m, vram.CPU)
			if err != nil {
				t.Fatal(err)
			}
			nn.Release(m)
			r.(*nn.Sequential).Half()
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seq := nn.NewSequential(nn.NewLinear(4, 3), nn.NewLinear(3, 2))
			if _, err := quant.Quantize(seq); err != nil {
				t.Fatal(err)
			}
			m := tt.convert(seq)
			defer nn.Release(m)
			for _, b := range nn.NamedBuffers(m) {
				want := vram.Float32
				if b.Name == "0.weight" || b.Name == "1.weight" {
					want = vram.Int8
				}
				if got := b.Tensor.DType(); got != want {
					t.Errorf("buffer %q is %v, want %v", b.Name, got, want)
				}
			}
		})
	}
}
