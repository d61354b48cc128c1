package vram_test

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"testing"

	. "github.com/vramgo/vram"
)

// TestRandomMisuseFailsCleanly calls the tensor API 40,000 times with
// random operands (every dtype, empty and strided views, tensors that
// require gradients, released ones) and random, mostly invalid, integer
// arguments, as a hostile caller would. Every failure must be a vram error
// that Catch returns: a runtime panic (an index out of range, a nil
// dereference) fails the test, once per op and message, with its stack.
func TestRandomMisuseFailsCleanly(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	dts := []DType{Float32, Float64, Float16, BFloat16, Int64, Int32, Int8, Bool}
	ri := func() int { return r.IntN(9) - 3 }
	mk := func() *Tensor {
		nd := r.IntN(5)
		sh := make(Shape, nd)
		for i := range sh {
			sh[i] = r.IntN(4)
		}
		x := Randn(sh)
		switch r.IntN(4) {
		case 0:
			if nd >= 2 {
				x = x.Transpose(0, nd-1)
			}
		case 1:
			if nd >= 1 && sh[0] > 1 {
				x = x.Narrow(0, 1, sh[0]-1)
			}
		}
		if r.IntN(3) == 0 {
			x = x.Cast(dts[r.IntN(len(dts))])
		}
		if r.IntN(4) == 0 && x.DType().IsFloat() {
			x = x.Detach().SetRequiresGrad(true)
		}
		return x
	}
	type op struct {
		name string
		fn   func(a, b, c *Tensor)
	}
	ops := []op{
		{"add", func(a, b, c *Tensor) { a.Add(b) }},
		{"matmul", func(a, b, c *Tensor) { a.MatMul(b) }},
		{"sum", func(a, b, c *Tensor) { a.Sum(ri(), ri()) }},
		{"mean", func(a, b, c *Tensor) { a.Mean(ri()) }},
		{"max", func(a, b, c *Tensor) { a.Max(ri()) }},
		{"argmax", func(a, b, c *Tensor) { a.ArgMax(ri(), r.IntN(2) == 0) }},
		{"var", func(a, b, c *Tensor) { a.Var([]int{ri()}, ri(), false) }},
		{"softmax", func(a, b, c *Tensor) { a.Softmax(ri()) }},
		{"logsoftmax", func(a, b, c *Tensor) { a.LogSoftmax(ri()) }},
		{"gather", func(a, b, c *Tensor) { a.Gather(ri(), b.Long()) }},
		{"reshape", func(a, b, c *Tensor) { a.Reshape(ri(), ri()) }},
		{"view", func(a, b, c *Tensor) { a.View(ri(), ri(), ri()) }},
		{"flatten", func(a, b, c *Tensor) { a.Flatten(ri(), ri()) }},
		{"permute", func(a, b, c *Tensor) { a.Permute(ri(), ri(), ri()) }},
		{"transpose", func(a, b, c *Tensor) { a.Transpose(ri(), ri()) }},
		{"narrow", func(a, b, c *Tensor) { a.Narrow(ri(), ri(), ri()) }},
		{"slice", func(a, b, c *Tensor) { a.Slice(ri(), ri(), ri(), ri()) }},
		{"select", func(a, b, c *Tensor) { a.Select(ri(), ri()) }},
		{"unsqueeze", func(a, b, c *Tensor) { a.Unsqueeze(ri()) }},
		{"squeeze", func(a, b, c *Tensor) { a.Squeeze(ri()) }},
		{"expand", func(a, b, c *Tensor) { a.Expand(ri(), ri(), ri()) }},
		{"cat", func(a, b, c *Tensor) { Cat([]*Tensor{a, b}, ri()) }},
		{"stack", func(a, b, c *Tensor) { Stack([]*Tensor{a, b, c}, ri()) }},
		{"where", func(a, b, c *Tensor) { Where(a.Cast(Bool), b, c) }},
		{"embedding", func(a, b, c *Tensor) { Embedding(a.Long(), b) }},
		{"xent", func(a, b, c *Tensor) { CrossEntropy(a, b.Long()) }},
		{"mse", func(a, b, c *Tensor) { MSELoss(a, b) }},
		{"layernorm", func(a, b, c *Tensor) { LayerNorm(a, []int{ri()}, b, c, 1e-5) }},
		{"rmsnorm", func(a, b, c *Tensor) { RMSNorm(a, []int{ri()}, b, float64(ri())) }},
		{"normalize", func(a, b, c *Tensor) { Normalize(a, float64(ri()), ri(), 1e-12) }},
		{"linear", func(a, b, c *Tensor) { Linear(a, b, c) }},
		{"maxpool", func(a, b, c *Tensor) {
			MaxPool2d(a, Pool2dParams{Kernel: [2]int{ri(), ri()}, Stride: [2]int{ri(), ri()}, Padding: [2]int{ri(), ri()}})
		}},
		{"avgpool", func(a, b, c *Tensor) {
			AvgPool2d(a, Pool2dParams{Kernel: [2]int{ri(), ri()}, Stride: [2]int{ri(), ri()}, Padding: [2]int{ri(), ri()}})
		}},
		{"adaptive", func(a, b, c *Tensor) { AdaptiveAvgPool2d(a, ri(), ri()) }},
		{"conv", func(a, b, c *Tensor) {
			Conv2d(a, b, c, Conv2dParams{Stride: [2]int{ri(), ri()}, Padding: [2]int{ri(), ri()}, Dilation: [2]int{ri(), ri()}, Groups: ri()})
		}},
		{"convT", func(a, b, c *Tensor) {
			ConvTranspose2d(a, b, c, Conv2dParams{Stride: [2]int{ri(), ri()}, Padding: [2]int{ri(), ri()}, Dilation: [2]int{ri(), ri()}, Groups: ri()})
		}},
		{"bn", func(a, b, c *Tensor) { BatchNorm2d(a, b, c, nil, nil, r.IntN(2) == 0, 0.1, 1e-5) }},
		{"bnrelu", func(a, b, c *Tensor) { BatchNorm2dReLU(a, a, b, c, nil, nil, true, 0.1, 1e-5) }},
		{"int8", func(a, b, c *Tensor) { LinearInt8(a, b.Cast(Int8), c, nil) }},
		{"copyfrom", func(a, b, c *Tensor) { a.CopyFrom(b) }},
		{"addinplace", func(a, b, c *Tensor) { a.AddInPlace(b) }},
		{"item", func(a, b, c *Tensor) { a.Item() }},
		{"size", func(a, b, c *Tensor) { a.Size(ri()) }},
		{"contig", func(a, b, c *Tensor) { a.Contiguous(ChannelsLast) }},
		{"tomf", func(a, b, c *Tensor) { a.ToMemoryFormat(ChannelsLast) }},
		{"backward", func(a, b, c *Tensor) { a.Sum().Backward() }},
		{"backward2", func(a, b, c *Tensor) { a.Backward(Gradient(b)) }},
		{"checkpoint", func(a, b, c *Tensor) { Checkpoint(func(x *Tensor) *Tensor { return x.Mul(b) }, a, b).Sum().Backward() }},
		{"raw", func(a, b, c *Tensor) { a.SetRawBytes(b.RawBytes()) }},
		{"string", func(a, b, c *Tensor) { _ = a.String() }},
		{"released", func(a, b, c *Tensor) { a.Release(); a.Add(b) }},
		{"castinplace", func(a, b, c *Tensor) { a.CastInPlace(dts[r.IntN(len(dts))]); a.Add(b) }},
		{"moveto", func(a, b, c *Tensor) { a.MoveTo(Sim(0)); a.Add(b) }},
		{"to", func(a, b, c *Tensor) { a.To(Sim(0)).Add(b) }},
	}
	found := map[string]string{}
	ok := map[string]int{} // calls that succeeded, per op
	defer func() { t.Logf("calls that succeeded: %v", ok) }()
	for it := 0; it < 40000; it++ {
		o := ops[r.IntN(len(ops))]
		func() {
			defer func() {
				if e := recover(); e != nil {
					s := fmt.Sprint(e)
					st := string(debug.Stack())
					k := o.name + ": " + s
					if len(k) > 120 {
						k = k[:120]
					}
					if _, ok := found[k]; !ok {
						lines := strings.Split(st, "\n")
						if len(lines) > 30 {
							lines = lines[:30]
						}
						found[k] = strings.Join(lines, "\n")
					}
				}
			}()
			Catch(func() {
				Tidy(func() {
					a, b, c := mk(), mk(), mk()
					if r.IntN(2) == 0 {
						b = RandnLike(a)
						c = RandnLike(a)
					}
					if r.IntN(3) == 0 {
						a = Randn(Shape{r.IntN(3) + 1, r.IntN(4) + 1, r.IntN(6) + 1, r.IntN(6) + 1})
						b = Randn(Shape{r.IntN(4) + 1, a.Size(1), r.IntN(3) + 1, r.IntN(3) + 1})
						c = Randn(Shape{b.Size(0)})
						if r.IntN(2) == 0 {
							c = Randn(Shape{a.Size(1)})
						}
					}
					o.fn(a, b, c)
					ok[o.name]++
				})
			})
		}()
	}
	for k, v := range found {
		t.Errorf("%s\n%s", k, v)
	}
}
