package nn_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestTransformerNilSubLayers sets one sub-layer of a transformer layer,
// or a layer of a stack, to nil after construction, as a caller swapping
// parts by hand might: the forward pass must refuse it with a vram error
// of kind ErrArgument naming the layer, not dereference nil.
func TestTransformerNilSubLayers(t *testing.T) {
	o := nn.TransformerOptions{DimFeedforward: 6}
	x := vram.Randn(vram.Shape{3, 2, 4}) // [S, N, E]
	enc := func(change func(l *nn.TransformerEncoderLayer)) func() {
		return func() {
			l := nn.NewTransformerEncoderLayer(4, 2, o)
			change(l)
			l.Forward(x)
		}
	}
	dec := func(change func(l *nn.TransformerDecoderLayer)) func() {
		return func() {
			l := nn.NewTransformerDecoderLayer(4, 2, o)
			change(l)
			l.ForwardMemory(x, x, nn.DecoderMasks{})
		}
	}
	tests := []struct {
		name string
		op   string
		run  func()
	}{
		{"encoder self_attn", "transformer_encoder_layer", enc(func(l *nn.TransformerEncoderLayer) { l.SelfAttn = nil })},
		{"encoder linear1", "transformer_encoder_layer", enc(func(l *nn.TransformerEncoderLayer) { l.Linear1 = nil })},
		{"encoder linear2", "transformer_encoder_layer", enc(func(l *nn.TransformerEncoderLayer) { l.Linear2 = nil })},
		{"encoder norm1", "transformer_encoder_layer", enc(func(l *nn.TransformerEncoderLayer) { l.Norm1 = nil })},
		{"encoder norm2", "transformer_encoder_layer", enc(func(l *nn.TransformerEncoderLayer) { l.Norm2 = nil })},
		{"encoder dropout", "transformer_encoder_layer", enc(func(l *nn.TransformerEncoderLayer) { l.Dropout = nil })},
		{"encoder dropout1", "transformer_encoder_layer", enc(func(l *nn.TransformerEncoderLayer) { l.Dropout1 = nil })},
		{"encoder dropout2", "transformer_encoder_layer", enc(func(l *nn.TransformerEncoderLayer) { l.Dropout2 = nil })},
		{"decoder self_attn", "transformer_decoder_layer", dec(func(l *nn.TransformerDecoderLayer) { l.SelfAttn = nil })},
		{"decoder multihead_attn", "transformer_decoder_layer", dec(func(l *nn.TransformerDecoderLayer) { l.MultiheadAttn = nil })},
		{"decoder norm3", "transformer_decoder_layer", dec(func(l *nn.TransformerDecoderLayer) { l.Norm3 = nil })},
		{"decoder dropout3", "transformer_decoder_layer", dec(func(l *nn.TransformerDecoderLayer) { l.Dropout3 = nil })},
		{"decoder linear1", "transformer_decoder_layer", dec(func(l *nn.TransformerDecoderLayer) { l.Linear1 = nil })},
		{"encoder stack layer", "transformer_encoder_layer", func() {
			e := nn.NewTransformerEncoder(nn.NewTransformerEncoderLayer(4, 2, o), 2, nil)
			e.Layers[1] = nil
			e.Forward(x)
		}},
		{"decoder stack layer", "transformer_decoder_layer", func() {
			d := nn.NewTransformerDecoder(nn.NewTransformerDecoderLayer(4, 2, o), 2, nil)
			d.Layers[0] = nil
			d.ForwardMemory(x, x, nn.DecoderMasks{})
		}},
		{"transformer encoder", "transformer", func() {
			m := nn.NewTransformer(4, 2, 1, 1, o)
			m.Encoder = nil
			m.ForwardSrcTgt(x, x, nn.TransformerMasks{})
		}},
		{"transformer decoder", "transformer", func() {
			m := nn.NewTransformer(4, 2, 1, 1, o)
			m.Decoder = nil
			m.ForwardSrcTgt(x, x, nn.TransformerMasks{})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked with %T %v, want a vram error", r, r)
					}
				}()
				err = vram.Catch(tc.run)
			}()
			var ve *vram.Error
			if !errors.Is(err, vram.ErrArgument) || !errors.As(err, &ve) || ve.Op != tc.op {
				t.Fatalf("got %v, want a %s error of kind ErrArgument", err, tc.op)
			}
		})
	}
}

// TestTransformerStackNilPointerNorm sets a stack's Norm to a nil
// *LayerNorm after construction: as NewTransformerEncoder and
// NewTransformerDecoder take such a norm, the stack runs without one
// rather than call Forward on nil.
func TestTransformerStackNilPointerNorm(t *testing.T) {
	o := nn.TransformerOptions{DimFeedforward: 6, NoDropout: true}
	x := vram.Randn(vram.Shape{3, 2, 4}, vram.WithGenerator(vram.NewGenerator(3)))
	var none *nn.LayerNorm
	e := nn.NewTransformerEncoder(nn.NewTransformerEncoderLayer(4, 2, o, vram.WithGenerator(vram.NewGenerator(1))), 2, nn.NewLayerNorm([]int{4}, 1e-5))
	d := nn.NewTransformerDecoder(nn.NewTransformerDecoderLayer(4, 2, o, vram.WithGenerator(vram.NewGenerator(2))), 2, nn.NewLayerNorm([]int{4}, 1e-5))
	e.Norm, d.Norm = none, none
	for name, run := range map[string]func() *vram.Tensor{
		"encoder": func() *vram.Tensor { return e.Forward(x) },
		"decoder": func() *vram.Tensor { return d.ForwardMemory(x, x, nn.DecoderMasks{}) },
	} {
		var y *vram.Tensor
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s: panicked with %T %v", name, r, r)
				}
			}()
			if err := vram.Catch(func() { y = run() }); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}()
		if !slices.Equal(y.Shape(), x.Shape()) {
			t.Errorf("%s: shape %v, want %v", name, y.Shape(), x.Shape())
		}
	}
}
