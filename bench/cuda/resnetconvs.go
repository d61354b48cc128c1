package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/vramgo/vram/backend"
	cb "github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/native/cuda"
)

// resnet50Convs are the distinct convolutions of a torchvision ResNet-50
// at 224×224 (its v1.5 blocks: the stride on the 3×3), with how many
// times each occurs in one forward pass.
var resnet50Convs = []struct {
	name                     string
	c, hw, o, k, stride, pad int
	count                    int
}{
	{"stem_7x7_s2", 3, 224, 64, 7, 2, 3, 1},
	{"l1_1x1_64_64", 64, 56, 64, 1, 1, 0, 1},
	{"l1_3x3_64", 64, 56, 64, 3, 1, 1, 3},
	{"l1_1x1_64_256", 64, 56, 256, 1, 1, 0, 4},
	{"l1_1x1_256_64", 256, 56, 64, 1, 1, 0, 2},
	{"l2_1x1_256_128", 256, 56, 128, 1, 1, 0, 1},
	{"l2_3x3_128_s2", 128, 56, 128, 3, 2, 1, 1},
	{"l2_1x1_128_512", 128, 28, 512, 1, 1, 0, 4},
	{"l2_down_256_512_s2", 256, 56, 512, 1, 2, 0, 1},
	{"l2_1x1_512_128", 512, 28, 128, 1, 1, 0, 3},
	{"l2_3x3_128", 128, 28, 128, 3, 1, 1, 3},
	{"l3_1x1_512_256", 512, 28, 256, 1, 1, 0, 1},
	{"l3_3x3_256_s2", 256, 28, 256, 3, 2, 1, 1},
	{"l3_1x1_256_1024", 256, 14, 1024, 1, 1, 0, 6},
	{"l3_down_512_1024_s2", 512, 28, 1024, 1, 2, 0, 1},
	{"l3_1x1_1024_256", 1024, 14, 256, 1, 1, 0, 5},
	{"l3_3x3_256", 256, 14, 256, 3, 1, 1, 5},
	{"l4_1x1_1024_512", 1024, 14, 512, 1, 1, 0, 1},
	{"l4_3x3_512_s2", 512, 14, 512, 3, 2, 1, 1},
	{"l4_1x1_512_2048", 512, 7, 2048, 1, 1, 0, 3},
	{"l4_down_1024_2048_s2", 1024, 14, 2048, 1, 2, 0, 1},
	{"l4_1x1_2048_512", 2048, 7, 512, 1, 1, 0, 2},
	{"l4_3x3_512", 512, 7, 512, 3, 1, 1, 2},
}

// benchResNetConvs times each distinct ResNet-50 convolution at batch 64,
// channels-last, in float32 (TF32) and bf16, in each direction (forward,
// input gradient, the input gradient added to the destination, filter
// gradient), with cuDNN's benchmark mode under each limit of -cudnn-limits
// (for the dtypes -convs-dtypes names):
// one line a convolution, direction and limit on stderr, and per limit the
// sum over a step (each convolution times its count) as a row.
// bench/torch_resnet_convs.py times the same convolutions in PyTorch.
func benchResNetConvs(d *cb.Device, limits []int) {
	if _, err := cb.CuDNNVersion(); err != nil {
		emit("resnet_convs_skipped", 0, "", err.Error())
		return
	}
	old := cb.CuDNN()
	defer cb.SetCuDNN(old)
	const batch, runs = 64, 20
	s := d.DefaultStream()
	acc, _ := backend.Device(d).(backend.ConvAccumulator)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	must(cuda.CtxSetCurrent(d.Context()))
	ev0, err := cuda.EventCreate(cuda.EventDefault)
	must(err)
	defer cuda.EventDestroy(ev0)
	ev1, err := cuda.EventCreate(cuda.EventDefault)
	must(err)
	defer cuda.EventDestroy(ev1)
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		if !strings.Contains(*convsDTypes, dt.String()) {
			continue
		}
		for _, limit := range limits {
			cb.SetCuDNN(cb.CuDNNSettings{Benchmark: true, BenchmarkLimit: limit})
			sums := map[string]float64{}
			var search time.Duration
			for _, c := range resnet50Convs {
				oh := backend.ConvOutputSize(c.hw, c.k, c.stride, c.pad, 1)
				x := convView(d, dt, true, batch, c.c, c.hw, c.hw)
				w := convView(d, dt, true, c.o, c.c, c.k, c.k)
				y := convView(d, dt, true, batch, c.o, oh, oh)
				dx := convView(d, dt, true, batch, c.c, c.hw, c.hw)
				dw := convView(d, dt, true, c.o, c.c, c.k, c.k)
				p := backend.Conv2DParams{Stride: [2]int{c.stride, c.stride}, Padding: [2]int{c.pad, c.pad}, Dilation: [2]int{1, 1}, Groups: 1}
				dirs := []struct {
					name string
					run  func()
				}{
					{"fwd", func() { must(d.Conv2D(s, y, x, w, backend.View{}, p, false)) }},
					{"dgrad", func() { must(d.Conv2DBackwardData(s, dx, y, w, p)) }},
					{"wgrad", func() { must(d.Conv2DBackwardFilter(s, dw, backend.View{}, y, x, p)) }},
				}
				if acc != nil {
					dirs = append(dirs, struct {
						name string
						run  func()
					}{"dgrad_acc", func() { must(acc.Conv2DBackwardDataAccumulate(s, dx, y, w, p)) }})
				}
				for _, dir := range dirs {
					s0 := cb.CuDNNStatistics()
					dir.run() // the search
					must(d.Synchronize())
					search += cb.CuDNNStatistics().SearchTime - s0.SearchTime
					for range 3 {
						dir.run()
					}
					must(d.Synchronize())
					// GPU time between two events, as PyTorch's side measures
					// it, so that the host's time to queue a small
					// convolution does not count.
					must(cuda.CtxSetCurrent(d.Context()))
					must(cuda.EventRecord(ev0, d.Stream()))
					for range runs {
						dir.run()
					}
					must(cuda.CtxSetCurrent(d.Context()))
					must(cuda.EventRecord(ev1, d.Stream()))
					must(cuda.EventSynchronize(ev1))
					el, err := cuda.EventElapsedTime(ev0, ev1)
					must(err)
					us := float64(el.Nanoseconds()) / 1000 / runs
					fmt.Fprintf(os.Stderr, "resnet_convs %s limit %d %s %s: %.1f us\n", dt, limit, c.name, dir.name, us)
					sums[dir.name] += us * float64(c.count)
				}
				for _, v := range []backend.View{x, w, y, dx, dw} {
					d.Free(v.Buf, s)
				}
			}
			for _, dir := range []string{"fwd", "dgrad", "dgrad_acc", "wgrad"} {
				if v, ok := sums[dir]; ok {
					emit(fmt.Sprintf("resnet_convs_%s_%s_limit%d", dt, dir, limit), v/1000, "ms",
						"the distinct ResNet-50 convolutions at batch 64, channels-last, each times its count in a step, benchmark mode")
				}
			}
			emit(fmt.Sprintf("resnet_convs_%s_search_limit%d", dt, limit), float64(search.Microseconds())/1000, "ms", "benchmark mode's searches")
		}
	}
}
