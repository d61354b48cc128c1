package nn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend/cpu"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// TestStacksRefusedBeforeAllocating builds stacks whose count of layers
// (or copies of a layer) multiplies a small layer past any machine's
// memory: each constructor refuses them with an ErrOutOfMemory error that
// names it, the count and the bytes against the limit, before it
// allocates a thing. They allocated layer after layer until the host ran
// out of memory. The stacks that need more host memory than the CPU
// device's limit only for the bookkeeping of their many tiny parameters
// are refused as well, their data alone fitting. It runs in a process of
// its own under a low host memory limit, so that a stack that is not
// refused stops at the limit rather than at the machine's memory.
func TestStacksRefusedBeforeAllocating(t *testing.T) {
	if !memtest.InChild(t) {
		return
	}
	memtest.Settle(vram.CPU)
	limit := cpu.LiveBytes() + 4<<20
	if err := cpu.Configure(cpu.Options{MemoryLimit: limit}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cpu.Configure(cpu.Options{}); err != nil {
			t.Error(err)
		}
	}()
	tests := []struct {
		name  string
		op    string
		want  []string
		build func()
	}{
		{"LSTM of 2^40 layers", "lstm", []string{"num_layers 1099511627776", "input_size 32", "hidden_size 32"},
			func() { nn.NewLSTM(32, 32, nn.RecurrentOptions{NumLayers: 1 << 40}) }},
		{"GRU of 2^40 layers both ways", "gru", []string{"num_layers 1099511627776", "in both directions"},
			func() { nn.NewGRU(16, 16, nn.RecurrentOptions{NumLayers: 1 << 40, Bidirectional: true}) }},
		{"RNN of 2^40 layers", "rnn", []string{"num_layers 1099511627776"},
			func() { nn.NewRNN(1, 1, nn.RecurrentOptions{NumLayers: 1 << 40}) }},
		{"LSTM with projections of 2^40 layers", "lstm", []string{"num_layers 1099511627776", "proj_size 2"},
			func() { nn.NewLSTM(4, 4, nn.RecurrentOptions{NumLayers: 1 << 40, ProjSize: 2, NoBias: true}) }},
		{"LSTM of 2^50 float64 layers", "lstm", []string{"num_layers 1125899906842624"},
			func() { nn.NewLSTM(1, 1, nn.RecurrentOptions{NumLayers: 1 << 50}, vram.Float64) }},
		{"transformer encoder of 2^40 copies", "transformer_encoder", []string{"num_layers 1099511627776"}, func() {
			layer := nn.NewTransformerEncoderLayer(8, 2, nn.TransformerOptions{DimFeedforward: 16})
			defer nn.Release(layer)
			nn.NewTransformerEncoder(layer, 1<<40, nil)
		}},
		{"transformer decoder of 2^40 copies", "transformer_decoder", []string{"num_layers 1099511627776"}, func() {
			layer := nn.NewTransformerDecoderLayer(8, 2, nn.TransformerOptions{DimFeedforward: 16, NoBias: true})
			defer nn.Release(layer)
			nn.NewTransformerDecoder(layer, 1<<40, nil)
		}},
		{"transformer of 2^40 encoder layers", "transformer", []string{"1099511627776 encoder"},
			func() { nn.NewTransformer(8, 2, 1<<40, 1, nn.TransformerOptions{DimFeedforward: 16}) }},
		{"transformer of 2^40 decoder layers", "transformer", []string{"1099511627776 decoder"},
			func() { nn.NewTransformer(8, 2, 1, 1<<40, nn.TransformerOptions{DimFeedforward: 16}) }},
		// Layers whose data takes half the limit, and whose 4 parameters
		// each hold far more host memory than their 4 bytes of data.
		{"RNN of tiny layers past the limit by their count", "rnn", []string{"host memory"},
			func() { nn.NewRNN(1, 1, nn.RecurrentOptions{NumLayers: int(limit / 32)}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := vram.MemoryAllocated(vram.CPU)
			err := vram.Catch(tt.build)
			var e *vram.Error
			if !errors.As(err, &e) || e.Kind != vram.ErrOutOfMemory || e.Op != tt.op {
				t.Fatalf("got %v, want an ErrOutOfMemory *vram.Error of %s", err, tt.op)
			}
			for _, part := range append(tt.want, "bytes", "nothing was allocated") {
				if !strings.Contains(e.Detail, part) {
					t.Errorf("%q does not say %q", e.Detail, part)
				}
			}
			if after := vram.MemoryAllocated(vram.CPU); after != before {
				t.Errorf("%d bytes allocated on the CPU before, %d after", before, after)
			}
		})
	}
}
