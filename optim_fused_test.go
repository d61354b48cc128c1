package vram

import (
	"errors"
	"testing"
)

// On the CPU, which has no fused kernel, FusedAdamStep declines and leaves
// its operands alone; its argument checks still apply.
func TestFusedAdamStepCPU(t *testing.T) {
	p, g, m, v := Ones(Shape{3}), Full(Shape{3}, 0.5), Zeros(Shape{3}), Zeros(Shape{3})
	defer func() {
		for _, x := range []*Tensor{p, g, m, v} {
			x.Release()
		}
	}()
	if FusedAdamStep(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.01, 1, true) {
		t.Fatal("FusedAdamStep on the CPU returned true")
	}
	for _, x := range p.Float64s() {
		if x != 1 {
			t.Fatalf("p changed: %v", p.Float64s())
		}
	}
	if err := Catch(func() { FusedAdamStep(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0, 0, false) }); !errors.Is(err, ErrArgument) {
		t.Errorf("step 0: err = %v, want ErrArgument", err)
	}
	if err := Catch(func() { FusedAdamStep(p, nil, m, v, 1e-3, 0.9, 0.999, 1e-8, 0, 1, false) }); !errors.Is(err, ErrArgument) {
		t.Errorf("nil gradient: err = %v, want ErrArgument", err)
	}
}
