package tune_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/tune"
)

// TestPowerMode checks what Power mode returns against a step that fits
// up to a known batch: the last power-of-two multiple of Init that fits,
// MaxBatch where the doubling reaches it, or, when Init does not fit, the
// first of Init halved again and again that does.
func TestPowerMode(t *testing.T) {
	oom := vram.Catch(func() { vram.Zeros(vram.Shape{1 << 30}, dev) })
	if !errors.Is(oom, vram.ErrOutOfMemory) {
		t.Fatalf("no out-of-memory error to test with: %v", oom)
	}
	tests := []struct {
		name    string
		largest int // the largest batch that fits
		opts    tune.Options
		want    int
		batches []int
	}{
		{"doubles to the first failure", 100, tune.Options{}, 64, []int{1, 2, 4, 8, 16, 32, 64, 128}},
		{"from Init 3", 100, tune.Options{Init: 3}, 96, []int{3, 6, 12, 24, 48, 96, 192}},
		{"MaxBatch fits", 100, tune.Options{MaxBatch: 10}, 10, []int{1, 2, 4, 8, 10}},
		{"MaxBatch does not fit", 9, tune.Options{MaxBatch: 10}, 8, []int{1, 2, 4, 8, 10}},
		{"Init does not fit", 5, tune.Options{Init: 12}, 3, []int{12, 6, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var batches []int
			step := func(b int) error {
				batches = append(batches, b)
				if b > tt.largest {
					return oom
				}
				return nil
			}
			tt.opts.Mode = tune.Power
			got, rep, err := tune.FindBatchSize(dev, step, tt.opts)
			if err != nil || got != tt.want || rep.Largest != tt.want {
				t.Fatalf("got %d (largest %d), %v; want %d", got, rep.Largest, err, tt.want)
			}
			if !slices.Equal(batches, tt.batches) {
				t.Errorf("tried %v, want %v", batches, tt.batches)
			}
		})
	}
}
