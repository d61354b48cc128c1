package cuda

import (
	"testing"

	"github.com/vramgo/vram/backend/backendtest"
)

// TestUnscaleCheck runs the fused unscale kernel over the table of
// backendtest.RunUnscale on cuda:0 (it skips without a GPU): every float
// dtype, inf, -inf and NaN, overflow on unscaling, and more gradients than
// one launch takes.
func TestUnscaleCheck(t *testing.T) { backendtest.RunUnscale(t, gpu(t, 0)) }
