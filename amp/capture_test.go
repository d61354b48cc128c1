package amp_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/optim"
)

// TestGradScalerCapture checks that each part of a scaled step refuses a
// graph capture with vram.ErrCapturing (a captured Scale would multiply by
// the scale of the capture in every replay, whatever Update made of it
// since), and that the refused capture leaves the scaler to step eagerly
// as usual.
func TestGradScalerCapture(t *testing.T) {
	d := vram.Sim(0)
	tests := []struct {
		name string
		fn   func(s *amp.GradScaler, o optim.Optimizer, w *vram.Tensor)
	}{
		{"scale", func(s *amp.GradScaler, _ optim.Optimizer, w *vram.Tensor) { s.Scale(w.Sum()).Backward() }},
		{"unscale", func(s *amp.GradScaler, _ optim.Optimizer, w *vram.Tensor) {
			if _, err := s.Unscale([]*vram.Tensor{w}); err != nil {
				panic(err)
			}
		}},
		{"step", func(s *amp.GradScaler, o optim.Optimizer, w *vram.Tensor) { s.Step(o, []*vram.Tensor{w}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := vram.Ones(vram.Shape{4}).To(d)
			defer w.Release()
			w.SetRequiresGrad(true)
			s, err := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 8})
			if err != nil {
				t.Fatal(err)
			}
			o, err := optim.NewSGD([]*vram.Tensor{w}, optim.SGDConfig{LR: 0.5})
			if err != nil {
				t.Fatal(err)
			}
			vram.Tidy(func() { w.MulScalar(2).Sum().Backward() }) // the gradient the capture finds: 2
			g, err := vram.CaptureGraph(d, func() { vram.Tidy(func() { tc.fn(s, o, w) }) })
			if g != nil || !errors.Is(err, vram.ErrCapturing) {
				t.Fatalf("capture: %v; want an error wrapping ErrCapturing", err)
			}
			if got := s.CurrentScale(); got != 8 {
				t.Fatalf("scale %v after the refused capture, want 8", got)
			}
			o.ZeroGrad()
			vram.Tidy(func() { s.Scale(w.MulScalar(2).Sum()).Backward() })
			if !s.Step(o, []*vram.Tensor{w}) {
				t.Fatal("the eager step after the refused capture did not step")
			}
			s.Update()
			if got := w.Float32s(); got[0] != 0 {
				t.Fatalf("parameter %v after the step, want 0 (1 - 0.5·2)", got[0])
			}
		})
	}
}
