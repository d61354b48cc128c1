package nn_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// TestTransformerHugeSizes checks that sizes and layer counts whose
// parameters have more elements than an int counts are refused by the
// module being made, before anything is allocated or copied, rather than
// wrapped into a negative shape or cloned until memory runs out, and that
// a module that runs out of memory while making its parameters leaves
// none of them allocated and says so as itself.
func TestTransformerHugeSizes(t *testing.T) {
	dev := vram.Sim(1)
	small := func() *nn.TransformerEncoderLayer {
		return nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 4}, dev)
	}
	smallDec := func() *nn.TransformerDecoderLayer {
		return nn.NewTransformerDecoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 4}, dev)
	}
	sizes := []struct {
		name string
		fn   func()
		op   string
	}{
		{"encoder layer d_model", func() { nn.NewTransformerEncoderLayer(1<<62, 1, nn.TransformerOptions{DimFeedforward: 4}, dev) }, "transformer_encoder_layer"},
		{"encoder layer dim_feedforward", func() { nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 1 << 62}, dev) }, "transformer_encoder_layer"},
		{"decoder layer d_model", func() { nn.NewTransformerDecoderLayer(1<<31, 1, nn.TransformerOptions{DimFeedforward: 4}, dev) }, "transformer_decoder_layer"},
		{"transformer layers", func() { nn.NewTransformer(1<<20, 1, 1<<30, 1, nn.TransformerOptions{DimFeedforward: 4}, dev) }, "transformer"},
		{"encoder stack", func() { nn.NewTransformerEncoder(small(), 1<<62, nil) }, "transformer_encoder"},
		{"decoder stack", func() { nn.NewTransformerDecoder(smallDec(), 1<<61, nil) }, "transformer_decoder"},
	}
	for _, tc := range sizes {
		t.Run("overflow/"+tc.name, func(t *testing.T) {
			memtest.Settle(dev)
			base := vram.MemoryAllocated(dev)
			err := vram.Catch(tc.fn)
			var ve *vram.Error
			if !errors.As(err, &ve) || !errors.Is(err, vram.ErrArgument) || ve.Op != tc.op || !strings.Contains(ve.Detail, "more parameters than") {
				t.Fatalf("got %v, want an ErrArgument from %q saying the parameters are too many", err, tc.op)
			}
			if strings.Contains(tc.name, "stack") {
				return // the caller keeps the layer it passed
			}
			if got := vram.MemoryAllocated(dev); got != base {
				t.Fatalf("%d bytes allocated after the failure, want %d", got, base)
			}
		})
	}
	// Sim devices hold 256 MiB. The attention of 1024 features (16 MiB
	// a block) fits; a feed-forward block of 1<<17 (512 MiB a matrix) does
	// not. A transformer's encoder layer, of 1<<14 (64 MiB a matrix), fits
	// and its decoder layer does not fit beside it.
	oom := []struct {
		name string
		fn   func()
		op   string
	}{
		{"encoder layer", func() { nn.NewTransformerEncoderLayer(1024, 1, nn.TransformerOptions{DimFeedforward: 1 << 17}, dev) }, "transformer_encoder_layer"},
		{"decoder layer", func() { nn.NewTransformerDecoderLayer(1024, 1, nn.TransformerOptions{DimFeedforward: 1 << 17}, dev) }, "transformer_decoder_layer"},
		{"transformer", func() { nn.NewTransformer(1024, 1, 1, 1, nn.TransformerOptions{DimFeedforward: 1 << 14}, dev) }, "transformer"},
		{"transformer clones", func() { nn.NewTransformer(1024, 1, 3, 1, nn.TransformerOptions{DimFeedforward: 1 << 13}, dev) }, "transformer"},
	}
	for _, tc := range oom {
		t.Run("out of memory/"+tc.name, func(t *testing.T) {
			memtest.Settle(dev)
			base := vram.MemoryAllocated(dev)
			err := vram.Catch(tc.fn)
			var ve *vram.Error
			if !errors.Is(err, vram.ErrOutOfMemory) || !errors.As(err, &ve) || ve.Op != tc.op {
				t.Fatalf("got %v, want an out-of-memory error from %q", err, tc.op)
			}
			if got := vram.MemoryAllocated(dev); got != base {
				t.Fatalf("%d bytes allocated after the failure, want %d", got, base)
			}
		})
	}
}

// TestTransformerNilReceivers checks that the stacks' and the
// transformer's forwards on a nil module are ErrArgument errors, as the
// layers' are, rather than a nil dereference that vram.Catch does not
// turn into an error.
func TestTransformerNilReceivers(t *testing.T) {
	x := vram.Zeros(vram.Shape{3, 2, 4})
	tests := []struct {
		name string
		fn   func()
		op   string
	}{
		{"encoder Forward", func() { (*nn.TransformerEncoder)(nil).Forward(x) }, "transformer_encoder"},
		{"encoder ForwardMasked", func() { (*nn.TransformerEncoder)(nil).ForwardMasked(x, nn.EncoderMasks{}) }, "transformer_encoder"},
		{"decoder ForwardMemory", func() { (*nn.TransformerDecoder)(nil).ForwardMemory(x, x, nn.DecoderMasks{}) }, "transformer_decoder"},
		{"transformer ForwardSrcTgt", func() { (*nn.Transformer)(nil).ForwardSrcTgt(x, x, nn.TransformerMasks{}) }, "transformer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked with %v, want an error", r)
					}
				}()
				err = vram.Catch(tc.fn)
			}()
			var ve *vram.Error
			if !errors.As(err, &ve) || !errors.Is(err, vram.ErrArgument) || ve.Op != tc.op || !strings.Contains(ve.Detail, "nil") {
				t.Fatalf("got %v, want an ErrArgument from %q about a nil module", err, tc.op)
			}
		})
	}
}

// TestTransformerBatchFirstChanged checks that a Transformer whose
// BatchFirst was changed after construction, so that it no longer says
// what its layers do, is refused saying so, rather than checking the
// batch sizes along the wrong dimension: inputs the layers take were
// refused as of different batch sizes, and inputs of different batch
// sizes reached the layers.
func TestTransformerBatchFirstChanged(t *testing.T) {
	tests := []struct {
		name     string
		modelBF  bool
		src, tgt vram.Shape
	}{
		{"sequence-first layers", false, vram.Shape{3, 2, 4}, vram.Shape{5, 2, 4}},
		{"batch-first layers", true, vram.Shape{2, 3, 4}, vram.Shape{2, 5, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := nn.NewTransformer(4, 2, 1, 1, nn.TransformerOptions{DimFeedforward: 6, BatchFirst: tc.modelBF})
			defer nn.Release(m)
			m.BatchFirst = !tc.modelBF
			err := vram.Catch(func() { m.ForwardSrcTgt(vram.Zeros(tc.src), vram.Zeros(tc.tgt), nn.TransformerMasks{}) })
			var ve *vram.Error
			if !errors.As(err, &ve) || !errors.Is(err, vram.ErrArgument) || ve.Op != "transformer" || !strings.Contains(ve.Detail, "BatchFirst") {
				t.Fatalf("got %v, want an ErrArgument from \"transformer\" about BatchFirst", err)
			}
		})
	}
}

// TestGenerateSquareSubsequentMaskErrors checks that the mask's errors
// name it, whatever fails: a negative size, a size whose square an int
// cannot count, and an integer dtype that cannot hold -Inf (as PyTorch's
// torch.full refuses). Bool gives the mask of true above the diagonal.
func TestGenerateSquareSubsequentMaskErrors(t *testing.T) {
	tests := []struct {
		name string
		n    int
		opts []vram.Option
		kind error
	}{
		{"negative", -1, nil, vram.ErrArgument},
		{"huge", 1 << 40, nil, vram.ErrShape},
		{"integer dtype", 3, []vram.Option{vram.Int64}, vram.ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(func() { nn.GenerateSquareSubsequentMask(tc.n, tc.opts...) })
			var ve *vram.Error
			if !errors.As(err, &ve) || ve.Op != "generate_square_subsequent_mask" {
				t.Fatalf("got %v, want an error from \"generate_square_subsequent_mask\"", err)
			}
			if !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want kind %v", err, tc.kind)
			}
		})
	}
	m := nn.GenerateSquareSubsequentMask(3, vram.Bool)
	defer m.Release()
	if got, want := m.Bools(), []bool{false, true, true, false, false, true, false, false, false}; !slices.Equal(got, want) {
		t.Fatalf("bool mask %v, want %v", got, want)
	}
}

// TestTransformerActivationFunc checks a function given as the
// feed-forward activation (PyTorch's callable activation): it is refused
// beside an activation name, its nil result is an error naming it, a
// function that returns its argument is released once, and the clones of
// a stack and a transformer's layers keep it.
func TestTransformerActivationFunc(t *testing.T) {
	x := vram.Randn(vram.Shape{3, 2, 4})
	errs := []struct {
		name string
		fn   func()
		kind error
		text string
	}{
		{"with a name", func() {
			nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{Activation: "gelu", ActivationFunc: (*vram.Tensor).Silu})
		}, vram.ErrArgument, "ActivationFunc"},
		{"nil result", func() {
			l := nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6, ActivationFunc: func(*vram.Tensor) *vram.Tensor { return nil }})
			l.Forward(x)
		}, vram.ErrArgument, "activation function returned nil"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v, want a %v error saying %q", err, tc.kind, tc.text)
			}
		})
	}
	t.Run("identity", func(t *testing.T) {
		o := nn.TransformerOptions{DimFeedforward: 6, NoDropout: true, ActivationFunc: func(h *vram.Tensor) *vram.Tensor { return h }}
		l := nn.NewTransformerEncoderLayer(4, 2, o, vram.Float64)
		defer nn.Release(l)
		x := vram.Randn(vram.Shape{3, 2, 4}, vram.Float64)
		var got *vram.Tensor
		if err := vram.Catch(func() { got = l.Forward(x) }); err != nil {
			t.Fatal(err)
		}
		h := l.Norm1.Forward(x.Add(l.SelfAttn.Forward(x)))
		want := l.Norm2.Forward(h.Add(l.Linear2.Forward(l.Linear1.Forward(h))))
		checkValues(t, "output", got.Float64s(), want.Float64s(), 1e-12)
	})
	t.Run("clones", func(t *testing.T) {
		o := nn.TransformerOptions{DimFeedforward: 6, ActivationFunc: (*vram.Tensor).Silu}
		m := nn.NewTransformer(4, 2, 2, 2, o)
		defer nn.Release(m)
		for i, l := range m.Encoder.Layers {
			if l.ActivationFunc == nil || m.Decoder.Layers[i].ActivationFunc == nil {
				t.Fatalf("layer %d lost its activation function", i)
			}
		}
	})
}
