package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/selftest"
)

// hostConv computes y = conv(x, w) + b, then ReLU when relu is set, in
// float64 on the host: x is [N, C, H, W] and w [O, C/groups, KH, KW], both
// in NCHW order; b ([O]) may be nil. It returns y in NCHW order, its
// shape, and for each output the sum of the absolute products, the scale
// of its rounding error.
func hostConv(x, w, b []float64, xs, ws [4]int, p backend.Conv2DParams, relu bool) (y, scale []float64, ys [4]int) {
	n, c, h, wd := xs[0], xs[1], xs[2], xs[3]
	o, cg, kh, kw := ws[0], ws[1], ws[2], ws[3]
	oh := backend.ConvOutputSize(h, kh, p.Stride[0], p.Padding[0], p.Dilation[0])
	ow := backend.ConvOutputSize(wd, kw, p.Stride[1], p.Padding[1], p.Dilation[1])
	ys = [4]int{n, o, oh, ow}
	y, scale = make([]float64, n*o*oh*ow), make([]float64, n*o*oh*ow)
	og := o / p.Groups
	for ni := range n {
		for oi := range o {
			g := oi / og
			for yi := range oh {
				for xi := range ow {
					var s, abs float64
					if b != nil {
						s, abs = b[oi], math.Abs(b[oi])
					}
					for ci := range cg {
						for ky := range kh {
							iy := yi*p.Stride[0] - p.Padding[0] + ky*p.Dilation[0]
							if iy < 0 || iy >= h {
								continue
							}
							for kx := range kw {
								ix := xi*p.Stride[1] - p.Padding[1] + kx*p.Dilation[1]
								if ix < 0 || ix >= wd {
									continue
								}
								v := x[((ni*c+g*cg+ci)*h+iy)*wd+ix] * w[((oi*cg+ci)*kh+ky)*kw+kx]
								s += v
								abs += math.Abs(v)
							}
						}
					}
					if relu {
						s = max(s, 0)
					}
					i := ((ni*o+oi)*oh+yi)*ow + xi
					y[i], scale[i] = s, abs
				}
			}
		}
	}
	return y, scale, ys
}

// checkCuDNN runs a grouped, strided, dilated float32 convolution with a
// bias and ReLU through cuDNN ([Device.Conv2D]) and compares it with the
// host: within 1e-5 of the sum of |products| (2e-3 on TF32 tensor cores).
// It is skipped when cuDNN is turned off or absent: convolutions then use
// the composed path.
func (d *Device) checkCuDNN() selftest.Check {
	const name = "cudnn"
	if CuDNN().Disabled {
		return selftest.Skipped(name, "cuDNN is turned off (SetCuDNN, VRAM_CUDNN=off): convolutions, pooling and batch norm use vram's composed kernels")
	}
	if err := loadCuDNN(); err != nil {
		return selftest.Skipped(name, "cuDNN 9 was not found (see the libraries above): convolutions, pooling and batch norm use vram's composed kernels")
	}
	return selftest.Run(name, func() (string, error) {
		xs, ws := [4]int{2, 4, 9, 8}, [4]int{6, 2, 3, 3}
		p := backend.Conv2DParams{Stride: [2]int{2, 1}, Padding: [2]int{1, 1}, Dilation: [2]int{1, 2}, Groups: 2}
		r := rand.New(rand.NewPCG(9, 10))
		rnd := func(n int) ([]float64, []float32) {
			a, b := make([]float64, n), make([]float32, n)
			for i := range a {
				b[i] = float32(r.NormFloat64())
				a[i] = float64(b[i])
			}
			return a, b
		}
		x64, x32 := rnd(xs[0] * xs[1] * xs[2] * xs[3])
		w64, w32 := rnd(ws[0] * ws[1] * ws[2] * ws[3])
		b64, b32 := rnd(ws[0])
		ref, scale, ys := hostConv(x64, w64, b64, xs, ws, p, true)
		nan := make([]float32, len(ref))
		for i := range nan {
			nan[i] = float32(math.NaN())
		}
		s := d.DefaultStream()
		var views [4]backend.View
		for i, data := range [][]float32{x32, w32, b32, nan} {
			buf, err := d.Alloc(int64(4*len(data)), s, selftest.Region)
			if err != nil {
				return "", err
			}
			defer d.Free(buf, s)
			views[i] = backend.View{Buf: buf, DType: backend.Float32, Shape: []int{len(data)}, Strides: []int{1}}
			if err := d.CopyFromHost(s, views[i], float32Bytes(data)); err != nil {
				return "", err
			}
		}
		as4 := func(v backend.View, sh [4]int) backend.View {
			v.Shape = sh[:]
			v.Strides = backend.ContiguousStrides(v.Shape)
			return v
		}
		if err := d.Conv2D(s, as4(views[3], ys), as4(views[0], xs), as4(views[1], ws), views[2], p, true); err != nil {
			return "", err
		}
		out := make([]byte, 4*len(ref))
		if err := d.CopyToHost(s, out, views[3]); err != nil {
			return "", err
		}
		tol, how := 1e-5, "float32"
		if !CuDNN().NoTF32 {
			tol, how = 2e-3, "float32 on TF32 tensor cores"
		}
		worst := 0.0
		for i := range ref {
			got := float64(math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])))
			e := math.Abs(got - ref[i])
			if !(e <= tol*scale[i]+1e-6) { // NaN fails
				return "", fmt.Errorf("y[%d] = %v, the host computes %v (error %.2g, allowed %.2g)", i, got, ref[i], e, tol*scale[i]+1e-6)
			}
			if scale[i] > 0 {
				worst = max(worst, e/scale[i])
			}
		}
		return fmt.Sprintf("cuDNN %s: a %v convolution of %v (groups 2, stride 2x1, dilation 1x2) with bias and ReLU, %s, matches the host (largest error %.1e of the sum of |products|)",
			cudnnVersionString(), ws, xs, how, worst), nil
	})
}
