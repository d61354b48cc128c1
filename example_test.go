package vram_test

import (
	"errors"
	"fmt"
	"slices"

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

func ExampleTensor_NewTensor() {
	x := vram.Ones(vram.Shape{2}, vram.Float64)
	row := x.NewTensor([]int{1, 2, 3}, nil) // x's dtype and device
	scale := x.NewTensor(0.5, nil)          // one number: a 0-d tensor
	fmt.Println(row, scale.Shape(), scale.Item())
	// Output: Tensor([1, 2, 3], shape=[3], dtype=float64, device=cpu) [] 0.5
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
	// invalid vram: bad device "gpu0": unknown device kind "gpu0"; GPUs are "cuda" or "cuda:N" (want cpu, cuda, cuda:N or sim:N)
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

func ExampleZerosLike() {
	x := vram.Ones(vram.Shape{2, 3}, vram.Float64)
	z := vram.ZerosLike(x)               // x's shape, dtype and device
	h := vram.FullLike(x, 7, vram.Int32) // options override the dtype or device
	fmt.Println(z.Shape(), z.DType(), z.Device())
	fmt.Println(h)
	// Output:
	// [2, 3] float64 cpu
	// Tensor([[7, 7, 7], [7, 7, 7]], shape=[2, 3], dtype=int32, device=cpu)
}

func ExampleRandnLike() {
	x := vram.Zeros(vram.Shape{2}, vram.Float64)
	a := vram.RandnLike(x, vram.WithGenerator(vram.NewGenerator(42)))
	b := vram.Randn(vram.Shape{2}, vram.Float64, vram.WithGenerator(vram.NewGenerator(42)))
	fmt.Println(a.DType(), slices.Equal(a.Float64s(), b.Float64s()))
	// Output: float64 true
}

func ExampleEnableGrad() {
	w := vram.Ones(vram.Shape{2}, vram.WithGrad())
	vram.NoGrad(func() {
		fmt.Println(vram.GradEnabled(), w.MulScalar(2).RequiresGrad())
		vram.EnableGrad(func() { // a graph again, inside NoGrad
			fmt.Println(vram.GradEnabled(), w.MulScalar(2).RequiresGrad())
		})
		fmt.Println(vram.GradEnabled()) // NoGrad applies again
	})
	// Output:
	// false false
	// true true
	// false
}

func ExampleSetGradEnabled() {
	w := vram.Ones(vram.Shape{2}, vram.WithGrad())
	for _, phase := range []string{"train", "eval"} {
		// with torch.set_grad_enabled(phase == "train"):
		vram.SetGradEnabled(phase == "train", func() {
			loss := w.MulScalar(3).Sum()
			fmt.Println(phase, loss.RequiresGrad())
		})
	}
	// Output:
	// train true
	// eval false
}

func ExampleInferenceMode() {
	w := vram.Ones(vram.Shape{2}, vram.WithGrad())
	var y *vram.Tensor
	vram.InferenceMode(func() {
		vram.EnableGrad(func() { // does not turn recording back on
			y = w.MulScalar(2)
		})
	})
	fmt.Println(y.RequiresGrad(), y.IsInference())
	// Outside inference mode, an inference tensor cannot be saved for
	// backward; a clone made outside can.
	err := vram.Catch(func() { w.Mul(y) })
	fmt.Println(errors.Is(err, vram.ErrAutograd))
	fmt.Println(w.Mul(y.Clone()).RequiresGrad())
	// Output:
	// false true
	// true
	// true
}

func ExampleTensor_GetDevice() {
	x := vram.Ones(vram.Shape{2})
	s := x.To(vram.Sim(1))
	defer s.Release()
	fmt.Println(x.GetDevice(), s.GetDevice()) // get_device(): -1 on the CPU
	fmt.Println(x.Device().Index)             // the Device value itself: cpu is index 0
	// Output:
	// -1 1
	// 0
}

func ExampleSetDevice() {
	err := vram.SetDevice(vram.DeviceCount()) // one past the last GPU
	fmt.Println(errors.Is(err, vram.ErrUnavailable), vram.CurrentDevice())
	// Output: true 0
}

func ExampleTensor_Add_cpuScalar() {
	x := vram.FromSlice([]float32{1, 2, 3}, nil, vram.Sim(0)) // a simulated GPU
	two := vram.Scalar(2)                                     // a 0-d tensor on the CPU
	y := x.Mul(two).Add(vram.Scalar(1))                       // read as scalars, as in PyTorch
	fmt.Println(y.Device(), y.Float64s())
	err := vram.Catch(func() { x.Add(vram.Ones(vram.Shape{3})) }) // not 0-d: a mismatch
	fmt.Println(errors.Is(err, vram.ErrDevice))
	// Output:
	// sim:0 [3 5 7]
	// true
}

func ExampleTensor_Narrow() {
	dev := vram.Sim(1)
	live := func() int64 { return vram.Storage(dev).LiveBytes } // exact bytes of live tensor storage
	before := live()
	b := vram.Zeros(vram.Shape{1 << 20}, dev) // 4 MiB
	first := b.Narrow(0, 0, 1)                // a view: it shares b's storage
	b.Release()
	fmt.Println(live()-before, "bytes kept by a 1-element view")
	kept := first.Clone() // a copy of the part to keep, in its own storage
	first.Release()
	fmt.Println(live()-before, "bytes kept by a clone")
	kept.Release()
	// Output:
	// 4194304 bytes kept by a 1-element view
	// 4 bytes kept by a clone
}

// Work on a side stream, ordered before the default stream's with an
// event (torch.cuda.Stream and "with torch.cuda.stream(s)").
func ExampleWithStream() {
	dev := vram.Sim(0)
	side, err := vram.NewStream(dev)
	if err != nil {
		panic(err)
	}
	defer side.Release()
	x := vram.Full(vram.Shape{4}, 2, dev)
	defer x.Release()
	var y *vram.Tensor
	vram.WithStream(side, func() { y = x.MulScalar(10) })
	defer y.Release()
	vram.CurrentStream(dev).WaitStream(side) // the default stream waits for y
	fmt.Println(y.Float32s())
	// Output: [20 20 20 20]
}

// A batch copied to the GPU from pinned memory without waiting
// (pin_memory and non_blocking=True).
func ExampleTensor_PinMemory() {
	dev := vram.Sim(0)
	batch := vram.Full(vram.Shape{2, 3}, 1.5)
	defer batch.Release()
	pinned := batch.PinMemory(dev)
	defer pinned.Release()
	onDev := pinned.To(dev, vram.NonBlocking)
	defer onDev.Release()
	fmt.Println(pinned.IsPinned(), onDev.Sum().Item())
	// Output: true 9
}

func ExampleTensor_RegisterHook() {
	w := vram.FromSlice([]float64{1, 2}, nil, vram.WithGrad())
	h := w.MulScalar(3)
	// Clip the gradient reaching h, and through it w, to [-1, 1].
	h.RegisterHook(func(g *vram.Tensor) *vram.Tensor { return g.Clamp(-1, 1) })
	h.RetainGrad()
	h.Mul(h).Sum().Backward() // d/dh = 2h = [6 12]
	fmt.Println(h.Grad().Float64s(), w.Grad().Float64s())
	// Output: [1 1] [3 3]
}

func ExampleTensor_RetainGrad() {
	x := vram.FromSlice([]float64{1, 2}, nil, vram.WithGrad())
	y := x.Mul(x) // not a leaf: no gradient of its own unless retained
	y.RetainGrad()
	y.MulScalar(5).Sum().Backward()
	fmt.Println(y.Grad().Float64s(), x.Grad().Float64s())
	// Output: [5 5] [10 20]
}

// Grad returns gradients without storing them in the leaves
// (torch.autograd.grad).
func ExampleGrad() {
	x := vram.FromSlice([]float64{1, 2, 3}, nil, vram.WithGrad())
	h := x.Mul(x) // x²
	y := h.Sum()
	g := vram.Grad([]*vram.Tensor{y}, []*vram.Tensor{x, h})
	fmt.Println(g[0].Float64s(), g[1].Float64s(), x.Grad() == nil)
	// Output: [2 4 6] [1 1 1] true
}

// CheckpointMulti checkpoints a function of several tensors with several
// results.
func ExampleCheckpointMulti() {
	w := vram.FromSlice([]float64{2}, nil, vram.WithGrad())
	a := vram.FromSlice([]float64{1, 2}, nil)
	b := vram.FromSlice([]float64{3, 4}, nil)
	ys := vram.CheckpointMulti(func(xs []*vram.Tensor) []*vram.Tensor {
		return []*vram.Tensor{xs[0].Mul(w), xs[1].Mul(w).Sum()}
	}, []*vram.Tensor{a, b}, w)
	ys[0].Sum().Add(ys[1]).Backward() // d/dw = sum(a) + sum(b)
	fmt.Println(ys[0].Float64s(), ys[1].Item(), w.Grad().Float64s())
	// Output: [2 4] 14 [10]
}

// A generator's state, kept in a checkpoint, makes a resumed run draw the
// numbers the stopped run would have drawn next.
func ExampleGenerator_State() {
	g := vram.NewGenerator(1)
	g.Float64()
	st := g.State() // save with the checkpoint

	next := g.Float64()
	resumed := vram.NewGenerator(99) // a new process
	if err := resumed.SetState(st); err != nil {
		panic(err)
	}
	fmt.Println(resumed.Float64() == next)
	// Output: true
}

func ExampleManualSeed_perDevice() {
	// Each device draws from a generator of its own, so what one device
	// draws does not depend on what others draw in between.
	vram.ManualSeed(42)
	a := vram.Rand(vram.Shape{3}, vram.Sim(0))
	vram.ManualSeed(42)
	vram.Rand(vram.Shape{100}, vram.Sim(1)).Release() // another device's draws
	b := vram.Rand(vram.Shape{3}, vram.Sim(0))
	fmt.Println(slices.Equal(a.Float32s(), b.Float32s()))

	// A checkpoint saves each device's state beside the CPU's.
	st, err := vram.RNGStateDevice(vram.Sim(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	c := vram.Rand(vram.Shape{3}, vram.Sim(0))
	if err := vram.SetRNGStateDevice(vram.Sim(0), st); err != nil {
		fmt.Println(err)
		return
	}
	d := vram.Rand(vram.Shape{3}, vram.Sim(0))
	fmt.Println(slices.Equal(c.Float32s(), d.Float32s()))
	for _, t := range []*vram.Tensor{a, b, c, d} {
		t.Release()
	}
	vram.ManualSeed(0)
	// Output:
	// true
	// true
}

func ExampleEye() {
	fmt.Println(vram.Eye(2, 3))
	fmt.Println(vram.Eye(2, 2, vram.Int64))
	// Output:
	// Tensor([[1, 0, 0], [0, 1, 0]], shape=[2, 3], dtype=float32, device=cpu)
	// Tensor([[1, 0], [0, 1]], shape=[2, 2], dtype=int64, device=cpu)
}
