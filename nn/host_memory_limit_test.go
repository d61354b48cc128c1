package nn_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend/cpu"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// TestStacksPastTheHostLimit builds stacks of layers on the CPU under a
// host memory limit, beside a tensor that leaves them less room than they
// need although they fit under the limit, so that they pass the check
// made before allocating (TestStacksRefusedBeforeAllocating): the
// allocation that would pass the limit is an ErrOutOfMemory error with
// the CPU's numbers, and what was built before it is released. It runs
// in a process of its own, where no other test allocates while the limit
// is low.
func TestStacksPastTheHostLimit(t *testing.T) {
	if !memtest.InChild(t) {
		return
	}
	const room, free = 32 << 20, 2 << 20
	tests := []struct {
		name  string
		build func()
	}{
		{"LSTM", func() { nn.NewLSTM(32, 32, nn.RecurrentOptions{NumLayers: 256}) }},
		{"GRU, bidirectional", func() { nn.NewGRU(16, 16, nn.RecurrentOptions{NumLayers: 512, Bidirectional: true}) }},
		{"transformer encoder", func() {
			layer := nn.NewTransformerEncoderLayer(32, 4, nn.TransformerOptions{DimFeedforward: 64})
			defer nn.Release(layer)
			nn.NewTransformerEncoder(layer, 256, nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			memtest.Settle(vram.CPU)
			base := cpu.LiveBytes()
			limit := base + room
			if err := cpu.Configure(cpu.Options{MemoryLimit: limit}); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := cpu.Configure(cpu.Options{}); err != nil {
					t.Error(err)
				}
			}()
			held := vram.Zeros(vram.Shape{(room - free) / 4})
			err := vram.Catch(tt.build)
			held.Release()
			if !errors.Is(err, vram.ErrOutOfMemory) {
				t.Fatalf("got %v, want an ErrOutOfMemory error", err)
			}
			var oom *cpu.OutOfMemoryError
			if !errors.As(err, &oom) {
				t.Fatalf("%v does not wrap a *cpu.OutOfMemoryError", err)
			}
			if oom.Limit != limit || oom.Live+oom.Requested <= limit || oom.Live > limit {
				t.Errorf("%d bytes asked beside %d live under a limit of %d, want the limit %d and no room", oom.Requested, oom.Live, oom.Limit, limit)
			}
			for _, part := range []string{"out of memory", strconv.FormatInt(limit, 10) + " bytes"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("%q does not say %q", err, part)
				}
			}
			memtest.Settle(vram.CPU)
			if got := cpu.LiveBytes(); got != base {
				t.Errorf("%d bytes live after the failure, %d before", got, base)
			}
		})
	}
}
