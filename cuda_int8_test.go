package vram_test

import (
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/quant"
)

// TestCUDAInt8 checks the int8 dtype on cuda:0 against the CPU: casts
// from floats (truncation, wrapping), arithmetic, a reduction, a scatter
// and a copy back.
func TestCUDAInt8(t *testing.T) {
	requireCUDA(t, 1)
	dev := vram.CUDA(0)
	vals := []float32{1.9, -1.9, 127, -128, 130, -300, 0, 55.5}
	for _, d := range []vram.Device{vram.CPU, dev} {
		x := vram.FromSlice(vals, vram.Shape{8}, d)
		q := x.Cast(vram.Int8)
		if got := q.Int64s(); !slices.Equal(got, []int64{1, -1, 127, -128, -126, -44, 0, 55}) {
			t.Errorf("%s: cast to int8 = %v", d, got)
		}
		s := q.Add(q)
		if got := s.Int64s(); !slices.Equal(got, []int64{2, -2, -2, 0, 4, -88, 0, 110}) {
			t.Errorf("%s: q+q = %v", d, got)
		}
		m := q.Max()
		if got := m.Int64s(); !slices.Equal(got, []int64{127}) {
			t.Errorf("%s: max = %v", d, got)
		}
		f := q.Cast(vram.BFloat16).Cast(vram.Float32)
		if got := f.Float32s(); !slices.Equal(got, []float32{1, -1, 127, -128, -126, -44, 0, 55}) {
			t.Errorf("%s: back to float = %v", d, got)
		}
		for _, v := range []*vram.Tensor{x, q, s, m, f} {
			v.Release()
		}
	}
}

// TestCUDALinearInt8 checks vram.LinearInt8 on cuda:0 (the dequantization
// kernel, then the cuBLASLt product) against the CPU's fused int8 product
// for float32, bfloat16 and float16 inputs, that the transient float weight
// is freed when the call returns, and that a quantized model runs there.
func TestCUDALinearInt8(t *testing.T) {
	requireCUDA(t, 1)
	dev := vram.CUDA(0)
	g := vram.WithGenerator(vram.NewGenerator(11))
	r := vram.Randn(vram.Shape{1000, 1024}, g)
	c := r.MulScalar(50).Clamp(-127, 127)
	wq := c.Cast(vram.Int8)
	u := vram.Rand(vram.Shape{1000}, g)
	scale := u.MulScalar(0.01).AddScalar(0.001)
	bias := vram.Randn(vram.Shape{1000}, g)
	x := vram.Randn(vram.Shape{64, 1024}, g)
	defer func() {
		for _, v := range []*vram.Tensor{r, c, wq, u, scale, bias, x} {
			v.Release()
		}
	}()
	tols := map[vram.DType]float64{vram.Float32: 1e-3, vram.BFloat16: 5e-2, vram.Float16: 1e-2}
	for _, dt := range []vram.DType{vram.Float32, vram.BFloat16, vram.Float16} {
		xc, sc, bc := x.Cast(dt), scale.Cast(dt), bias.Cast(dt)
		want := vram.LinearInt8(xc, wq, sc, bc)
		xg, wg, sg, bg := xc.To(dev), wq.To(dev), sc.To(dev), bc.To(dev)
		// Earlier tests' garbage freed during the call would lower the
		// count (64 KiB once on an H100).
		memtest.Settle(dev)
		before := vram.MemoryAllocated(dev)
		got := vram.LinearInt8(xg, wg, sg, bg)
		if extra := vram.MemoryAllocated(dev) - before; extra != got.Bytes() {
			t.Errorf("%s: %d bytes left allocated after the call, want the output's %d", dt, extra, got.Bytes())
		}
		w, gv := want.Float32s(), got.Float32s()
		scaleRef := 0.0
		for _, v := range w {
			scaleRef = max(scaleRef, float64(abs32(v)))
		}
		closeSlices(t, dt.String(), gv, w, tols[dt], tols[dt]*scaleRef)
		for _, v := range []*vram.Tensor{xc, sc, bc, want, xg, wg, sg, bg, got} {
			v.Release()
		}
	}

	model := nn.NewSequential(nn.NewLinear(256, 512, g), nn.NewReLU(), nn.NewLinear(512, 10, g))
	defer nn.Release(model)
	in := vram.Randn(vram.Shape{8, 256}, g)
	defer in.Release()
	if _, err := quant.Quantize(model); err != nil {
		t.Fatal(err)
	}
	var cpu []float32
	vram.NoGrad(func() { vram.Tidy(func() { cpu = model.Forward(in).Float32s() }) })
	model.To(dev)
	var gpu []float32
	vram.NoGrad(func() { vram.Tidy(func() { gpu = model.Forward(in.To(dev)).Float32s() }) })
	closeSlices(t, "quantized model", gpu, cpu, 1e-3, 1e-3)
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}
