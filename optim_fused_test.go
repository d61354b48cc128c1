package vram

import (
	"errors"
	"math"
	"testing"
)

// On the CPU the fused step runs (the same arithmetic as CUDA's kernel);
// its argument checks apply, and it declines non-contiguous tensors.
func TestFusedAdamStepCPU(t *testing.T) {
	p, g, m, v := Ones(Shape{3}), Full(Shape{3}, 0.5), Zeros(Shape{3}), Zeros(Shape{3})
	defer func() {
		for _, x := range []*Tensor{p, g, m, v} {
			x.Release()
		}
	}()
	if !FusedAdamStep(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.01, 1, true) {
		t.Fatal("FusedAdamStep on the CPU returned false")
	}
	// AdamW, step 1: p = 1·(1 - 1e-5), then p - 1e-3·m̂/(sqrt(v̂) + eps) with
	// m̂ = 0.5 and sqrt(v̂) = 0.5.
	want := (1 - 1e-5) - 1e-3*0.5/(0.5+1e-8)
	for _, x := range p.Float64s() {
		if math.Abs(x-want) > 1e-7 {
			t.Fatalf("p = %v, want %v", p.Float64s(), want)
		}
	}
	wide := Zeros(Shape{3, 2})
	defer wide.Release()
	col := wide.Narrow(1, 0, 1).Reshape(3)
	defer col.Release()
	if FusedAdamStep(col, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0, 1, false) {
		t.Error("FusedAdamStep of a strided parameter returned true")
	}
	if err := Catch(func() { FusedAdamStep(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0, 0, false) }); !errors.Is(err, ErrArgument) {
		t.Errorf("step 0: err = %v, want ErrArgument", err)
	}
	if err := Catch(func() { FusedAdamStep(p, nil, m, v, 1e-3, 0.9, 0.999, 1e-8, 0, 1, false) }); !errors.Is(err, ErrArgument) {
		t.Errorf("nil gradient: err = %v, want ErrArgument", err)
	}
}
