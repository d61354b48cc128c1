package vram

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// poolValues returns n small integers (ties in every window), with NaN
// and -Inf among them when special is set.
func poolValues(seed uint64, n int, special bool) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(r.IntN(7) - 3)
		if special {
			switch r.IntN(9) {
			case 0:
				v[i] = math.NaN()
			case 1, 2:
				v[i] = math.Inf(-1)
			}
		}
	}
	return v
}

// TestCUDAPoolChannelsLast checks channels-last max and average pooling on
// cuda:0 (pool.cu's kernels) in float32 and bfloat16 against the CPU,
// forward and backward, on windows with ties, NaN and -Inf: the same
// outputs and the gradient given to the same elements as PyTorch's rules
// (first maximum, last NaN). Values and gradients are small integers, so
// bfloat16 holds them and every maximum's gradient exactly.
func TestCUDAPoolChannelsLast(t *testing.T) {
	needCUDA(t)
	cases := []struct {
		name  string
		shape []int
		p     Pool2dParams
		avg   bool
	}{
		{"stem 3x3/2", []int{2, 64, 17, 15}, Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, false},
		{"odd channels", []int{3, 33, 9, 9}, Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, false},
		{"rectangular", []int{2, 6, 5, 6}, Pool2dParams{Kernel: [2]int{2, 3}, Stride: [2]int{1, 2}, Padding: [2]int{1, 0}}, false},
		{"avg 3x3/2", []int{2, 64, 17, 15}, Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}, true},
		{"avg exclude pad", []int{2, 10, 7, 7}, Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, ExcludePad: true}, true},
		{"global avg", []int{4, 130, 7, 7}, Pool2dParams{Kernel: [2]int{7, 7}}, true},
	}
	for _, tc := range cases {
		for _, dt := range []DType{Float32, BFloat16} {
			for _, special := range []bool{false, true} {
				if special && tc.avg {
					continue
				}
				t.Run(fmt.Sprintf("%s %s special=%v", tc.name, dt, special), func(t *testing.T) {
					n := 1
					for _, s := range tc.shape {
						n *= s
					}
					x := FromSlice(poolValues(5, n, special), tc.shape)
					pool := func(x *Tensor) *Tensor {
						if tc.avg {
							return AvgPool2d(x, tc.p)
						}
						return MaxPool2d(x, tc.p)
					}
					run := func(d Device) (y, dx []float64) {
						xd := x.Cast(dt).To(d).Contiguous(ChannelsLast).Detach().SetRequiresGrad(true)
						out := pool(xd)
						if d != CPU && !out.IsContiguous(ChannelsLast) {
							t.Errorf("output strides %v, want channels-last", out.Strides())
						}
						g := FromSlice(poolValues(9, out.NumElements(), false), out.Shape()).Cast(dt).To(d)
						out.Backward(Gradient(g))
						return out.Cast(Float64).To(CPU).Float64s(), xd.Grad().Cast(Float64).To(CPU).Float64s()
					}
					wy, wdx := run(CPU)
					gy, gdx := run(CUDA(0))
					tol := 0.0
					if tc.avg {
						tol = 1e-6
						if dt == BFloat16 {
							tol = 1e-2
						}
					}
					for _, c := range []struct {
						what      string
						got, want []float64
					}{{"output", gy, wy}, {"input gradient", gdx, wdx}} {
						bad := 0
						for i := range c.want {
							g, w := c.got[i], c.want[i]
							if math.IsNaN(w) != math.IsNaN(g) || !math.IsNaN(w) && g != w && math.Abs(g-w) > tol*(1+math.Abs(w)) {
								if bad < 5 {
									t.Errorf("%s[%d] = %v, want %v", c.what, i, g, w)
								}
								bad++
							}
						}
						if bad > 0 {
							t.Errorf("%s: %d of %d wrong", c.what, bad, len(c.want))
						}
					}
				})
			}
		}
	}
}
