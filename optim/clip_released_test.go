package optim_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// TestGetTotalNormRefusesReleased checks that GetTotalNorm, which returns
// its errors, gives one of kind vram.ErrReleased for a released tensor,
// wherever it is in the list and whatever the norm type, instead of
// panicking.
func TestGetTotalNormRefusesReleased(t *testing.T) {
	live := vram.FromSlice([]float64{3, 4}, nil)
	defer live.Release()
	gone := vram.FromSlice([]float64{1}, nil)
	gone.Release()
	for _, tc := range []struct {
		name string
		ts   []*vram.Tensor
		o    optim.ClipOptions
	}{
		{"last", []*vram.Tensor{live, gone}, optim.ClipOptions{}},
		{"first", []*vram.Tensor{gone, live}, optim.ClipOptions{NormType: 1}},
		{"alone", []*vram.Tensor{gone}, optim.ClipOptions{ZeroNormType: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if perr := vram.Catch(func() { _, err = optim.GetTotalNorm(tc.ts, tc.o) }); perr != nil {
				t.Fatalf("panicked: %v", perr)
			}
			if !errors.Is(err, vram.ErrReleased) {
				t.Fatalf("err = %v, want vram.ErrReleased", err)
			}
		})
	}
}
