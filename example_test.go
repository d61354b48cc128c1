package vram_test

import (
	"errors"
	"fmt"

	"github.com/vramgo/vram"
)

func ExampleTensor_Backward() {
	w := vram.FromSlice([]float64{1, 2, 3}, nil, vram.WithGrad())
	x := vram.FromSlice([]float64{4, 5, 6}, nil)
	loss := w.Mul(x).Sum() // 1*4 + 2*5 + 3*6
	loss.Backward()
	fmt.Println(loss.Item(), w.Grad().Float64s())
	// Output: 32 [4 5 6]
}

func ExampleZeros() {
	a := vram.Zeros(vram.Shape{4, 3})                      // float32 on the default device
	b := vram.Zeros(vram.Shape{2}, vram.Float64, vram.CPU) // options: dtype, device
	fmt.Println(a.Shape(), a.DType(), a.Device())
	fmt.Println(b)
	// Output:
	// [4, 3] float32 cpu
	// Tensor([0, 0], shape=[2], dtype=float64, device=cpu)
}

func ExampleTensor_To() {
	dev := vram.CPU
	if vram.CUDAAvailable() {
		dev = vram.CUDA(0)
	}
	a := vram.Zeros(vram.Shape{4, 3})
	a = a.To(dev) // a copy on dev, or the same data when already there
	fmt.Println(a.Shape())
	// Output: [4, 3]
}

func ExampleTensor_NewOnes() {
	ones := vram.Ones(vram.Shape{2}, vram.Float16)
	newOnes := ones.NewOnes(vram.Shape{3, 4}) // same dtype and device as ones
	fmt.Println(newOnes.Shape(), newOnes.DType(), newOnes.Device() == ones.Device())
	// Output: [3, 4] float16 true
}

func ExampleCatch() {
	a := vram.Ones(vram.Shape{2, 3})
	b := vram.Ones(vram.Shape{4, 3})
	err := vram.Catch(func() { a.Add(b) })
	fmt.Println(errors.Is(err, vram.ErrShape))
	fmt.Println(err)
	// Output:
	// true
	// vram: add: shapes [2, 3] and [4, 3] cannot be broadcast together (dimension -2: 2 vs 4)
}

func ExampleDeviceMismatchError() {
	a := vram.Ones(vram.Shape{2}, vram.CPU)
	b := vram.Ones(vram.Shape{2}, vram.Sim(0)) // a simulated GPU
	err := vram.Catch(func() { a.Add(b) })
	var dm *vram.DeviceMismatchError
	if errors.As(err, &dm) {
		fmt.Println(dm.Expected, dm.Got)
	}
	fmt.Println(a.Add(b.To(a.Device())).Float64s()) // the fix
	// Output:
	// cpu sim:0
	// [2 2]
}

func ExampleTensor_Release() {
	before := vram.MemoryAllocated(vram.Sim(1))
	x := vram.Zeros(vram.Shape{1024}, vram.Sim(1)) // 4 KiB
	fmt.Println(vram.MemoryAllocated(vram.Sim(1)) - before)
	x.Release() // Python's del
	fmt.Println(vram.MemoryAllocated(vram.Sim(1)) - before)
	// Output:
	// 4096
	// 0
}

func ExampleTidy() {
	w := vram.Ones(vram.Shape{3}, vram.WithGrad())
	total := 0.0
	for range 3 {
		vram.Tidy(func() { // every temporary of the step is released at the end
			loss := w.MulScalar(2).Sum()
			loss.Backward()
			total += loss.Item() // a float64, not a tensor: the graph is not kept
		})
	}
	fmt.Println(total, w.Grad().Float64s())
	// Output: 18 [6 6 6]
}

func ExampleNoGrad() {
	w := vram.Ones(vram.Shape{2, 2}, vram.WithGrad())
	x := vram.Ones(vram.Shape{1, 2})
	vram.NoGrad(func() {
		y := x.MatMul(w) // inference: no graph, no saved activations
		fmt.Println(y.RequiresGrad(), y.Float64s())
	})
	// Output: false [2 2]
}

func ExampleParseDevice() {
	for _, s := range []string{"cpu", "cuda:1", "sim:0", "gpu0"} {
		d, err := vram.ParseDevice(s)
		fmt.Println(d, err)
	}
	// Output:
	// cpu <nil>
	// cuda:1 <nil>
	// sim:0 <nil>
	// invalid vram: bad device "gpu0": unknown device kind "gpu0" (want cpu, cuda, cuda:N or sim:N)
}

func ExampleLinearAct() {
	x := vram.FromSlice([]float64{1, 2, -1, 0}, vram.Shape{2, 2}, vram.WithGrad()) // a batch of two inputs
	w := vram.FromSlice([]float64{1, 1, 1, -1}, vram.Shape{2, 2})                  // [out, in]
	b := vram.FromSlice([]float64{0, -4}, nil)
	y := vram.LinearAct(x, w, b, vram.ActReLU) // relu(x·wᵀ + b) as one op
	fmt.Println(y.Float64s())
	y.Sum().Backward()
	fmt.Println(x.Grad().Float64s())
	// Output:
	// [3 0 0 0]
	// [1 1 0 0]
}

func ExampleBiasAct() {
	x := vram.FromSlice([]float32{-1, 0, 1, 2, 3, 4}, vram.Shape{2, 3})
	bias := vram.FromSlice([]float32{1, -1, 0}, nil)
	fmt.Println(vram.BiasAct(x, bias, vram.ActReLU).Float32s()) // relu(x + bias), bias on every row
	// Output: [0 0 1 3 2 4]
}
