package models

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// TestResNetReleasesWhenALayerPanics: when a layer panics mid-forward (out
// of memory, a wrong weight), the activations made so far are released,
// as nn.Sequential releases them, rather than left allocated until the
// garbage collector's backstop.
func TestResNetReleasesWhenALayerPanics(t *testing.T) {
	dev := vram.Sim(0)
	oom := nn.NewSequential(nn.Func(func(*vram.Tensor) *vram.Tensor {
		panic(&vram.Error{Op: "test", Kind: vram.ErrOutOfMemory, Detail: "a stage ran out of memory"})
	}))
	// bad holds the wrong weights, which nn.Release does not see.
	var bad []*vram.Tensor
	wrong := func(s vram.Shape) *vram.Tensor {
		w := vram.Zeros(s, dev)
		bad = append(bad, w)
		return w
	}
	// badWeight gives c a weight with one input channel too many.
	badWeight := func(c *nn.Conv2d) {
		s := c.Weight.Shape()
		s[1]++
		c.Weight = wrong(s)
	}
	tests := []struct {
		name   string
		model  func(Config, ...vram.Option) *ResNet
		break_ func(r *ResNet)
		want   error
	}{
		{"stage 1 runs out of memory", ResNet18, func(r *ResNet) { r.Layers[0] = oom }, vram.ErrOutOfMemory},
		{"stage 2 runs out of memory", ResNet18, func(r *ResNet) { r.Layers[1] = oom }, vram.ErrOutOfMemory},
		{"stage 4 runs out of memory", ResNet50, func(r *ResNet) { r.Layers[3] = oom }, vram.ErrOutOfMemory},
		{"basic block's second convolution", ResNet18, func(r *ResNet) { badWeight(r.Layers[1].At(0).(*BasicBlock).Conv2) }, vram.ErrShape},
		{"bottleneck's second convolution", ResNet50, func(r *ResNet) { badWeight(r.Layers[1].At(1).(*Bottleneck).Conv2) }, vram.ErrShape},
		{"bottleneck's third convolution", ResNet50, func(r *ResNet) { badWeight(r.Layers[2].At(0).(*Bottleneck).Conv3) }, vram.ErrShape},
		{"fully connected layer", ResNet18, func(r *ResNet) { r.FC.Weight = wrong(vram.Shape{10, 7}) }, vram.ErrShape},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			r := c.model(Config{NumClasses: 10}, dev)
			defer nn.Release(r)
			c.break_(r)
			defer func() {
				for _, w := range bad {
					w.Release()
				}
				bad = nil
			}()
			x := vram.Randn(vram.Shape{2, 3, 64, 64}, dev)
			defer x.Release()
			memtest.Settle(dev)
			before := vram.MemoryAllocated(dev)
			err := vram.Catch(func() { r.Forward(x).Release() })
			if !errors.Is(err, c.want) {
				t.Fatalf("forward: %v, want %v", err, c.want)
			}
			if left := vram.MemoryAllocated(dev) - before; left != 0 {
				t.Errorf("%d bytes left allocated after the panic", left)
			}
		})
	}
}
