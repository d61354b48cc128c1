package vram

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestConvGroupsAgainstWeight checks PyTorch's rule that a convolution's
// weight has at least Groups entries along dimension 0 ("Given groups=G,
// expected weight to be at least G at dimension 0"), for convolutions and
// transposed ones, and that channel counts Groups multiplies are refused
// rather than wrapped: with empty weights, huge groups passed the channel
// checks and reached an internal reshape.
func TestConvGroupsAgainstWeight(t *testing.T) {
	f32 := func(s ...int) *Tensor { return Zeros(Shape(s), Float32) }
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"empty weight, groups max", func() { Conv2d(f32(1, 0, 5, 5), f32(0, 0, 3, 3), nil, Conv2dParams{Groups: math.MaxInt}) }},
		{"channels wrap to zero", func() { Conv2d(f32(1, 0, 5, 5), f32(0, 2, 3, 3), nil, Conv2dParams{Groups: 1 << 62}) }},
		{"no output channels", func() { Conv2d(f32(1, 2, 5, 5), f32(0, 2, 3, 3), nil, Conv2dParams{}) }},
		{"transposed empty input, groups max", func() {
			ConvTranspose2d(f32(1, 0, 5, 5), f32(0, 2, 3, 3), nil, Conv2dParams{Groups: math.MaxInt})
		}},
		{"transposed output channels wrap", func() {
			ConvTranspose2d(f32(1, 0, 5, 5), f32(0, 4, 3, 3), f32(0), Conv2dParams{Groups: 1 << 62})
		}},
		{"1-D, groups max", func() { Conv1d(f32(1, 0, 5), f32(0, 0, 3), nil, Conv1dParams{Groups: math.MaxInt}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Catch(tc.f)
			if !errors.Is(err, ErrShape) && !errors.Is(err, ErrArgument) || !strings.Contains(fmt.Sprint(err), "groups") {
				t.Errorf("error %v, want a shape or argument error naming the groups", err)
			}
		})
	}
}
