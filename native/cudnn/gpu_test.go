package cudnn

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/internal/cudatest"
)

// devFloats copies host floats to a new device buffer, freed at the end of
// the test.
func devFloats(t *testing.T, ctx cuda.Context, host []float32) cuda.DevicePtr {
	t.Helper()
	n := uint64(len(host) * 4)
	p, err := cuda.MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctx.Do(func() error { return cuda.MemFree(p) }) })
	if err := cuda.MemcpyHtoD(p, unsafe.Pointer(&host[0]), n); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConvolutionForwardGPU runs a 3x3 convolution with stride 1 and
// padding 1 in float32 (FMA math: no TF32), through the heuristic's first
// algorithm and through a timed search, against a float64 host reference.
func TestConvolutionForwardGPU(t *testing.T) {
	devs := cudatest.Require(t)
	if _, err := Load(); err != nil {
		cudatest.SkipOrFail(t, "no cuDNN 9: %v", err)
	}
	v, err := GetVersion()
	if err != nil || v < 90000 {
		t.Fatalf("cudnnGetVersion: %d, %v", v, err)
	}
	t.Logf("cuDNN %d from %s", v, Library().Path)
	ctx := cudatest.Context(t, devs[0])
	const n, c, h, w, k, r = 2, 3, 7, 6, 4, 3
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, n*c*h*w)
	f := make([]float32, k*c*r*r)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for i := range f {
		f[i] = float32(rng.NormFloat64())
	}
	ref := make([]float64, n*k*h*w)
	for ni := 0; ni < n; ni++ {
		for ki := 0; ki < k; ki++ {
			for oy := 0; oy < h; oy++ {
				for ox := 0; ox < w; ox++ {
					var s float64
					for ci := 0; ci < c; ci++ {
						for ky := 0; ky < r; ky++ {
							for kx := 0; kx < r; kx++ {
								iy, ix := oy+ky-1, ox+kx-1
								if iy < 0 || iy >= h || ix < 0 || ix >= w {
									continue
								}
								s += float64(x[((ni*c+ci)*h+iy)*w+ix]) * float64(f[((ki*c+ci)*r+ky)*r+kx])
							}
						}
					}
					ref[((ni*k+ki)*h+oy)*w+ox] = s
				}
			}
		}
	}
	err = ctx.Do(func() error {
		hd, err := Create()
		if err != nil {
			return err
		}
		defer Destroy(hd)
		xd, _ := CreateTensorDescriptor()
		yd, _ := CreateTensorDescriptor()
		defer DestroyTensorDescriptor(xd)
		defer DestroyTensorDescriptor(yd)
		if err := SetTensor4dDescriptorEx(xd, DataFloat, n, c, h, w, c*h*w, h*w, w, 1); err != nil {
			return err
		}
		if err := SetTensor4dDescriptorEx(yd, DataFloat, n, k, h, w, k*h*w, h*w, w, 1); err != nil {
			return err
		}
		fd, err := CreateFilterDescriptor()
		if err != nil {
			return err
		}
		defer DestroyFilterDescriptor(fd)
		if err := SetFilter4dDescriptor(fd, DataFloat, FormatNCHW, k, c, r, r); err != nil {
			return err
		}
		cd, err := CreateConvolutionDescriptor()
		if err != nil {
			return err
		}
		defer DestroyConvolutionDescriptor(cd)
		if err := SetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CrossCorrelation, DataFloat); err != nil {
			return err
		}
		if err := SetConvolutionMathType(cd, FMAMath); err != nil {
			return err
		}
		xp, fp := devFloats(t, ctx, x), devFloats(t, ctx, f)
		yp := devFloats(t, ctx, make([]float32, len(ref)))
		const wsBytes = 16 << 20
		ws, err := cuda.MemAlloc(wsBytes)
		if err != nil {
			return err
		}
		defer cuda.MemFree(ws)

		perf := make([]AlgoPerf, FwdAlgoCount)
		cnt, err := GetConvolutionForwardAlgorithm_v7(hd, xd, fd, cd, yd, perf)
		if err != nil || cnt == 0 {
			t.Fatalf("heuristic: %d results, %v", cnt, err)
		}
		found, err := FindConvolutionForwardAlgorithmEx(hd, xd, xp, fd, fp, cd, yd, yp, nil, ws, wsBytes)
		if found != 0 || err == nil {
			t.Errorf("empty perf: %d, %v, want CUDNN_STATUS_BAD_PARAM", found, err)
		}
		timed := make([]AlgoPerf, FwdAlgoCount)
		found, err = FindConvolutionForwardAlgorithmEx(hd, xd, xp, fd, fp, cd, yd, yp, timed, ws, wsBytes)
		if err != nil || found == 0 {
			t.Fatalf("search: %d results, %v", found, err)
		}
		for _, p := range []AlgoPerf{perf[0], timed[0]} {
			if p.Status != StatusSuccess {
				continue
			}
			need, err := GetConvolutionForwardWorkspaceSize(hd, xd, fd, cd, yd, FwdAlgo(p.Algo))
			if err != nil {
				return err
			}
			if need > wsBytes {
				continue
			}
			alpha, beta := float32(1), float32(0)
			if err := ConvolutionForward(hd, unsafe.Pointer(&alpha), xd, xp, fd, fp, cd, FwdAlgo(p.Algo), ws, need,
				unsafe.Pointer(&beta), yd, yp); err != nil {
				return err
			}
			if err := cuda.CtxSynchronize(); err != nil {
				return err
			}
			got := make([]float32, len(ref))
			if err := cuda.MemcpyDtoH(unsafe.Pointer(&got[0]), yp, uint64(len(got)*4)); err != nil {
				return err
			}
			for i := range got {
				if d := math.Abs(float64(got[i]) - ref[i]); !(d <= 1e-4*(1+math.Abs(ref[i]))) {
					t.Fatalf("algo %d: y[%d] = %v, want %v", p.Algo, i, got[i], ref[i])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
