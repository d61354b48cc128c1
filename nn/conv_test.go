package nn_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

func TestConvLayerShapesAndInit(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(1))
	tests := []struct {
		name        string
		layer       nn.Module
		weight      vram.Shape
		bias        bool
		bound       float64
		in, outWant vram.Shape
	}{
		{"conv", nn.NewConv2d(3, 8, 3, nn.ConvOptions{Padding: 1}, g), vram.Shape{8, 3, 3, 3}, true, 1 / math.Sqrt(27),
			vram.Shape{2, 3, 10, 9}, vram.Shape{2, 8, 10, 9}},
		{"conv strided no bias", nn.NewConv2d(4, 6, 3, nn.ConvOptions{Stride: 2, NoBias: true}, g), vram.Shape{6, 4, 3, 3}, false, 1 / math.Sqrt(36),
			vram.Shape{1, 4, 9, 9}, vram.Shape{1, 6, 4, 4}},
		{"conv grouped dilated", nn.NewConv2d(4, 8, 3, nn.ConvOptions{Groups: 2, Dilation: 2, Padding: 2}, g), vram.Shape{8, 2, 3, 3}, true, 1 / math.Sqrt(18),
			vram.Shape{1, 4, 7, 7}, vram.Shape{1, 8, 7, 7}},
		{"transposed", nn.NewConvTranspose2d(4, 2, 3, nn.ConvOptions{Stride: 2, Padding: 1, OutputPadding: 1}, g), vram.Shape{4, 2, 3, 3}, true, 1 / math.Sqrt(18),
			vram.Shape{1, 4, 5, 5}, vram.Shape{1, 2, 10, 10}},
		{"conv per-axis", nn.NewConv2d(2, 4, 0, nn.ConvOptions{KernelHW: [2]int{1, 3}, StrideHW: [2]int{2, 1}, PaddingHW: [2]int{0, 1}, DilationHW: [2]int{1, 2}}, g),
			vram.Shape{4, 2, 1, 3}, true, 1 / math.Sqrt(6), vram.Shape{1, 2, 5, 6}, vram.Shape{1, 4, 3, 4}},
		{"conv same even kernel", nn.NewConv2d(2, 3, 2, nn.ConvOptions{PaddingSame: true, PaddingMode: "zeros"}, g), vram.Shape{3, 2, 2, 2}, true, 1 / math.Sqrt(8),
			vram.Shape{2, 2, 5, 4}, vram.Shape{2, 3, 5, 4}},
		{"conv same per-axis kernel", nn.NewConv2d(2, 3, 0, nn.ConvOptions{KernelHW: [2]int{3, 4}, PaddingSame: true}, g), vram.Shape{3, 2, 3, 4}, true, 1 / math.Sqrt(24),
			vram.Shape{1, 2, 5, 7}, vram.Shape{1, 3, 5, 7}},
		{"transposed per-axis", nn.NewConvTranspose2d(2, 4, 3, nn.ConvOptions{KernelHW: [2]int{2, 3}, StrideHW: [2]int{2, 1}, OutputPaddingHW: [2]int{1, 0}}, g),
			vram.Shape{2, 4, 2, 3}, true, 1 / math.Sqrt(24), vram.Shape{1, 2, 3, 3}, vram.Shape{1, 4, 7, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sd := nn.StateDict(tc.layer)
			w := sd["weight"]
			if w == nil || !slices.Equal(w.Shape(), tc.weight) {
				t.Fatalf("weight %v, want shape %v", w, tc.weight)
			}
			if _, ok := sd["bias"]; ok != tc.bias {
				t.Fatalf("bias present %v, want %v", ok, tc.bias)
			}
			for _, p := range tc.layer.Parameters() {
				if !p.RequiresGrad() {
					t.Errorf("parameter does not require grad")
				}
				if m := p.Abs().Max().Item(); m > tc.bound || m < tc.bound/2 {
					t.Errorf("largest |value| %v, want just under the bound %v", m, tc.bound)
				}
			}
			y := tc.layer.Forward(vram.Randn(tc.in))
			if !slices.Equal(y.Shape(), tc.outWant) {
				t.Fatalf("output %v, want %v", y.Shape(), tc.outWant)
			}
		})
	}
}

func TestLayerOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   func()
	}{
		{"groups not dividing", func() { nn.NewConv2d(4, 6, 3, nn.ConvOptions{Groups: 4}) }},
		{"zero channels", func() { nn.NewConv2d(0, 6, 3, nn.ConvOptions{}) }},
		{"zero kernel", func() { nn.NewConv2d(3, 6, 0, nn.ConvOptions{}) }},
		{"negative stride", func() { nn.NewConv2d(3, 6, 3, nn.ConvOptions{Stride: -1}) }},
		{"output padding on a convolution", func() { nn.NewConv2d(3, 6, 3, nn.ConvOptions{OutputPadding: 1}) }},
		{"output padding too large", func() { nn.NewConvTranspose2d(3, 6, 3, nn.ConvOptions{Stride: 2, OutputPadding: 2}) }},
		{"output padding too large on one axis", func() {
			nn.NewConvTranspose2d(3, 6, 3, nn.ConvOptions{StrideHW: [2]int{2, 1}, OutputPaddingHW: [2]int{1, 1}})
		}},
		{"zero kernel on one axis", func() { nn.NewConv2d(3, 6, 0, nn.ConvOptions{KernelHW: [2]int{3, 0}}) }},
		{"negative per-axis padding", func() { nn.NewConv2d(3, 6, 3, nn.ConvOptions{PaddingHW: [2]int{1, -1}}) }},
		{"unknown padding mode", func() { nn.NewConv2d(3, 6, 3, nn.ConvOptions{PaddingMode: "mirror"}) }},
		{"circular padding", func() { nn.NewConvTranspose2d(3, 6, 3, nn.ConvOptions{PaddingMode: "circular"}) }},
		{"same strided", func() { nn.NewConv2d(3, 6, 3, nn.ConvOptions{PaddingSame: true, StrideHW: [2]int{1, 2}}) }},
		{"same with padding", func() { nn.NewConv2d(3, 6, 3, nn.ConvOptions{PaddingSame: true, Padding: 1}) }},
		{"same transposed", func() { nn.NewConvTranspose2d(3, 6, 3, nn.ConvOptions{PaddingSame: true}) }},
		{"batch norm channels", func() { nn.NewBatchNorm2d(0) }},
		{"pool kernel", func() { nn.NewMaxPool2d(0, 1, 0) }},
		{"adaptive size", func() { nn.NewAdaptiveAvgPool2d(1, 0) }},
		{"adaptive max size", func() { nn.NewAdaptiveMaxPool2d(0, 1) }},
		{"dropout2d probability", func() { nn.NewDropout2d(1.5) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			if !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("got %v, want an ErrArgument", err)
			}
		})
	}
	x := vram.Randn(vram.Shape{1, 3, 4, 4})
	if err := vram.Catch(func() { nn.NewConv2d(4, 6, 3, nn.ConvOptions{}).Forward(x) }); !errors.Is(err, vram.ErrShape) {
		t.Errorf("wrong input channels: %v", err)
	}
	if err := vram.Catch(func() { nn.NewDropout2d(0.5).Forward(vram.Randn(vram.Shape{3, 4})) }); !errors.Is(err, vram.ErrShape) {
		t.Errorf("2-D input to Dropout2d: %v", err)
	}
}

func TestBatchNorm2dLayer(t *testing.T) {
	bn := nn.NewBatchNorm2d(3)
	var _ nn.Float32Layer = bn
	names := func(ps []nn.NamedParameter) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	if got := names(bn.NamedParameters()); !slices.Equal(got, []string{"weight", "bias"}) {
		t.Fatalf("parameters %v", got)
	}
	if got := names(nn.NamedBuffers(bn)); !slices.Equal(got, []string{"running_mean", "running_var", "num_batches_tracked"}) {
		t.Fatalf("buffers %v", got)
	}
	if bn.NumBatchesTracked.DType() != vram.Int64 || bn.NumBatchesTracked.Dim() != 0 || bn.RunningMean.RequiresGrad() {
		t.Fatalf("num_batches_tracked %v, running mean requires grad %v", bn.NumBatchesTracked, bn.RunningMean.RequiresGrad())
	}
	x := vram.Randn(vram.Shape{8, 3, 4, 4}, vram.WithGenerator(vram.NewGenerator(2))).MulScalar(2).AddScalar(3)
	y := bn.Forward(x)
	if m := y.Mean().Item(); math.Abs(m) > 1e-5 {
		t.Errorf("training output mean %v, want 0", m)
	}
	mean := x.Mean(0, 2, 3).Float64s()
	for i, v := range bn.RunningMean.Float64s() {
		if !near(v, 0.1*mean[i], 1e-5) {
			t.Errorf("running mean[%d] = %v, want %v", i, v, 0.1*mean[i])
		}
	}
	bn.Forward(x)
	if n := bn.NumBatchesTracked.Int64s()[0]; n != 2 {
		t.Errorf("num_batches_tracked %d, want 2", n)
	}
	// Evaluation mode: the running statistics normalize, and stay.
	bn.Eval()
	rm := bn.RunningMean.Float64s()
	ye := bn.Forward(x)
	if slices.Equal(ye.Float64s(), y.Float64s()) {
		t.Error("evaluation mode gave the training-mode output")
	}
	if !slices.Equal(bn.RunningMean.Float64s(), rm) || bn.NumBatchesTracked.Int64s()[0] != 2 {
		t.Error("evaluation mode changed the running statistics")
	}
	// Half and BFloat16 keep it float32; a 16-bit input comes back 16-bit.
	bn.Train()
	seq := nn.NewSequential(nn.NewConv2d(3, 3, 1, nn.ConvOptions{}), bn)
	seq.Half()
	if bn.Weight.DType() != vram.Float32 || bn.RunningMean.DType() != vram.Float32 {
		t.Fatalf("after Half: weight %s, running mean %s", bn.Weight.DType(), bn.RunningMean.DType())
	}
	yh := seq.Forward(x.Cast(vram.Float16))
	if yh.DType() != vram.Float16 {
		t.Fatalf("half model output %s", yh.DType())
	}
	yh.Cast(vram.Float32).Square().Sum().Backward()
	if g := bn.Weight.Grad(); g == nil || g.DType() != vram.Float32 {
		t.Fatalf("batch norm weight gradient %v", g)
	}
	// The cumulative average weighs every batch alike.
	ca := nn.NewBatchNorm2d(3)
	ca.CumulativeAverage = true
	var sum []float64
	for i := range 3 {
		xi := vram.Randn(vram.Shape{4, 3, 2, 2}, vram.WithGenerator(vram.NewGenerator(uint64(20+i))))
		m := xi.Mean(0, 2, 3).Float64s()
		if sum == nil {
			sum = make([]float64, len(m))
		}
		for k := range m {
			sum[k] += m[k] / 3
		}
		ca.Forward(xi)
	}
	checkValues(t, "cumulative running mean", ca.RunningMean.Float64s(), sum, 1e-5)
	// The module moves its buffers with it.
	if vram.Sim(0).Available() {
		bn.To(vram.Sim(0))
		for _, b := range nn.NamedBuffers(bn) {
			if b.Tensor.Device() != vram.Sim(0) {
				t.Errorf("buffer %s on %v after To", b.Name, b.Tensor.Device())
			}
		}
	}
}

// cnn is a small convolutional network in the layout of torchvision's
// models, for the tests.
func cnn(opts ...vram.Option) *nn.Sequential {
	return nn.NewSequential(
		nn.NewConv2d(1, 8, 3, nn.ConvOptions{Padding: 1, NoBias: true}, opts...),
		nn.NewBatchNorm2d(8, opts...),
		nn.NewReLU(),
		nn.NewMaxPool2d(2, 0, 0),
		nn.NewConv2d(8, 8, 3, nn.ConvOptions{Padding: 1}, opts...),
		nn.NewReLU(),
		nn.NewAdaptiveAvgPool2d(1, 1),
		nn.NewFlatten(),
		nn.NewLinear(8, 2, opts...),
	)
}

// stripes makes a batch of 12×12 images with horizontal (class 0) or
// vertical (class 1) stripes plus noise.
func stripes(n int, g *vram.Generator) (*vram.Tensor, *vram.Tensor) {
	vals := make([]float32, n*144)
	labels := make([]int64, n)
	for i := range n {
		labels[i] = int64(i % 2)
		phase := int(g.Float64() * 4)
		for y := range 12 {
			for x := range 12 {
				k := y
				if labels[i] == 1 {
					k = x
				}
				v := float32(0)
				if (k+phase)%4 < 2 {
					v = 1
				}
				vals[i*144+y*12+x] = v + float32(g.Float64()-0.5)*0.6
			}
		}
	}
	return vram.FromSlice(vals, vram.Shape{n, 1, 12, 12}), vram.FromSlice(labels, vram.Shape{n})
}

func TestSmallCNNTrains(t *testing.T) {
	g := vram.NewGenerator(3)
	m := cnn(vram.WithGenerator(vram.NewGenerator(4)))
	opt, err := optim.NewSGD(m.Parameters(), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	var first, last float64
	for step := range 30 {
		x, y := stripes(32, g)
		vram.Tidy(func() {
			opt.ZeroGrad()
			loss := nn.CrossEntropyLoss(m.Forward(x), y)
			loss.Backward()
			opt.Step()
			if step == 0 {
				first = loss.Item()
			}
			last = loss.Item()
		})
	}
	m.Eval()
	x, y := stripes(64, g)
	pred := m.Forward(x).ArgMax(1, false).Int64s()
	correct := 0
	for i, l := range y.Int64s() {
		if pred[i] == l {
			correct++
		}
	}
	t.Logf("loss %.3f -> %.3f, eval accuracy %d/64", first, last, correct)
	if !(last < first/2) || correct < 56 {
		t.Fatalf("did not learn: loss %.3f -> %.3f, accuracy %d/64", first, last, correct)
	}
}

func TestChannelsLastModelMatches(t *testing.T) {
	ref := cnn(vram.Float64, vram.WithGenerator(vram.NewGenerator(5)))
	cl := cnn(vram.Float64, vram.WithGenerator(vram.NewGenerator(5)))
	nn.ToMemoryFormat(cl, vram.ChannelsLast)
	for _, p := range cl.NamedParameters() {
		if p.Tensor.Dim() == 4 && !p.Tensor.IsContiguous(vram.ChannelsLast) {
			t.Fatalf("%s has strides %v after ToMemoryFormat", p.Name, p.Tensor.Strides())
		}
	}
	x, _ := stripes(4, vram.NewGenerator(6))
	x64 := x.Cast(vram.Float64)
	want := ref.Forward(x64)
	got := cl.Forward(x64.Contiguous(vram.ChannelsLast))
	checkValues(t, "channels-last model", got.Float64s(), want.Float64s(), 1e-10)
	want.Sum().Backward()
	got.Sum().Backward()
	rp, cp := ref.Parameters(), cl.Parameters()
	for i := range rp {
		checkValues(t, "gradient", cp[i].Grad().Float64s(), rp[i].Grad().Float64s(), 1e-10)
	}
	// Intermediate outputs keep the channels-last format, through the
	// batch norm, the activation and the pooling.
	h := x64.Contiguous(vram.ChannelsLast)
	for i := range 6 {
		h = cl.At(i).Forward(h)
		if h.Size(1) > 1 && !h.IsContiguous(vram.ChannelsLast) {
			t.Errorf("output of layer %d (%T) has strides %v, want channels-last", i, cl.At(i), h.Strides())
		}
	}
	if vram.Sim(0).Available() {
		cl.To(vram.Sim(0))
		for _, p := range cl.NamedParameters() {
			if p.Tensor.Dim() == 4 && !p.Tensor.IsContiguous(vram.ChannelsLast) {
				t.Fatalf("%s has strides %v after To", p.Name, p.Tensor.Strides())
			}
		}
		cl.To(vram.CPU)
	}
	nn.ToMemoryFormat(cl, vram.ContiguousFormat)
	for _, p := range cl.Parameters() {
		if !p.IsContiguous() {
			t.Fatalf("parameter strides %v after ToMemoryFormat(ContiguousFormat)", p.Strides())
		}
	}
}

func TestStateDictWithBuffers(t *testing.T) {
	src := cnn(vram.WithGenerator(vram.NewGenerator(7)))
	x, _ := stripes(8, vram.NewGenerator(8))
	src.Forward(x) // moves the running statistics
	sd := nn.StateDict(src)
	var keys []string
	for k := range sd {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"0.weight", "1.bias", "1.num_batches_tracked", "1.running_mean", "1.running_var", "1.weight",
		"4.bias", "4.weight", "8.bias", "8.weight"}
	if !slices.Equal(keys, want) {
		t.Fatalf("state dict keys %v, want %v (PyTorch's)", keys, want)
	}
	path := filepath.Join(t.TempDir(), "cnn.safetensors")
	if err := nn.Save(src, path); err != nil {
		t.Fatal(err)
	}
	dst := cnn(vram.WithGenerator(vram.NewGenerator(9)))
	if err := nn.Load(dst, path); err != nil {
		t.Fatal(err)
	}
	for k, v := range nn.StateDict(dst) {
		if k == "1.num_batches_tracked" {
			if v.Int64s()[0] != 1 {
				t.Errorf("num_batches_tracked %v after load, want 1", v.Int64s())
			}
			continue
		}
		checkValues(t, k, v.Float64s(), sd[k].Float64s(), 0)
	}
	// A file without the buffers is refused, naming them.
	lin := nn.NewSequential(nn.NewConv2d(1, 8, 3, nn.ConvOptions{Padding: 1, NoBias: true}))
	p2 := filepath.Join(t.TempDir(), "conv.safetensors")
	if err := nn.Save(lin, p2); err != nil {
		t.Fatal(err)
	}
	err := nn.Load(cnn(), p2)
	if err == nil || !strings.Contains(err.Error(), `"1.running_mean"`) {
		t.Fatalf("loading a file without the buffers: %v", err)
	}
}

func TestDropout2dZeroesWholeChannels(t *testing.T) {
	d := nn.NewDropout2d(0.5, vram.WithGenerator(vram.NewGenerator(10)))
	x := vram.Ones(vram.Shape{4, 16, 3, 3})
	y := d.Forward(x).Float64s()
	dropped := 0
	for ch := range 4 * 16 {
		v := y[ch*9]
		for i := range 9 {
			if y[ch*9+i] != v {
				t.Fatalf("channel %d is partly dropped: %v", ch, y[ch*9:ch*9+9])
			}
		}
		switch v {
		case 0:
			dropped++
		case 2:
		default:
			t.Fatalf("channel %d scaled to %v, want 0 or 2", ch, v)
		}
	}
	if dropped < 16 || dropped > 48 {
		t.Errorf("%d of 64 channels dropped at p = 0.5", dropped)
	}
	d.Eval()
	if got := d.Forward(x).Float64s(); slices.Min(got) != 1 || slices.Max(got) != 1 {
		t.Error("evaluation mode changed the input")
	}
	// A 3-D input keeps its shape.
	d.Train()
	if got := d.Forward(vram.Ones(vram.Shape{16, 2, 2})); !slices.Equal(got.Shape(), vram.Shape{16, 2, 2}) {
		t.Errorf("3-D output %v", got.Shape())
	}
}

func TestPoolAndFlattenLayers(t *testing.T) {
	x := vram.Randn(vram.Shape{2, 3, 8, 8})
	ceilMax := nn.NewMaxPool2d(3, 2, 0)
	ceilMax.Params.CeilMode = true
	ceilAvg := nn.NewAvgPool2d(3, 2, 1)
	ceilAvg.Params.CeilMode, ceilAvg.Params.DivisorOverride = true, 2
	for _, tc := range []struct {
		name string
		m    nn.Module
		want vram.Shape
	}{
		{"max pool", nn.NewMaxPool2d(3, 2, 1), vram.Shape{2, 3, 4, 4}},
		{"max pool ceil mode", ceilMax, vram.Shape{2, 3, 4, 4}},
		{"avg pool", nn.NewAvgPool2d(2, 0, 0), vram.Shape{2, 3, 4, 4}},
		{"avg pool ceil mode and divisor", ceilAvg, vram.Shape{2, 3, 5, 5}},
		{"adaptive", nn.NewAdaptiveAvgPool2d(3, 5), vram.Shape{2, 3, 3, 5}},
		{"adaptive max", nn.NewAdaptiveMaxPool2d(3, 5), vram.Shape{2, 3, 3, 5}},
		{"flatten", nn.NewFlatten(), vram.Shape{2, 192}},
	} {
		if got := tc.m.Forward(x).Shape(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: shape %v, want %v", tc.name, got, tc.want)
		}
	}
	am := nn.NewAdaptiveMaxPool2d(3, 2)
	if y, idx := am.ForwardWithIndices(x); !slices.Equal(y.Float64s(), am.Forward(x).Float64s()) || idx.DType() != vram.Int64 || !slices.Equal(idx.Shape(), y.Shape()) {
		t.Errorf("adaptive max ForwardWithIndices gave %v and indices %s %v", y.Shape(), idx.DType(), idx.Shape())
	}
	y, idx := ceilMax.ForwardWithIndices(x)
	if want := vram.MaxPool2d(x, ceilMax.Params); !slices.Equal(y.Float64s(), want.Float64s()) || !slices.Equal(idx.Shape(), want.Shape()) || idx.DType() != vram.Int64 {
		t.Errorf("ForwardWithIndices gave %v and indices %s %v", y.Shape(), idx.DType(), idx.Shape())
	}
}

func TestCNNUnderAutocast(t *testing.T) {
	m := cnn(vram.WithGenerator(vram.NewGenerator(11)))
	x, y := stripes(8, vram.NewGenerator(12))
	var loss *vram.Tensor
	vram.Autocast(vram.BFloat16, func() {
		h := m.At(0).Forward(x)
		if h.DType() != vram.BFloat16 {
			t.Errorf("convolution under autocast gave %s", h.DType())
		}
		loss = vram.Keep(nn.CrossEntropyLoss(m.Forward(x), y))
	})
	loss.Backward()
	bn := m.At(1).(*nn.BatchNorm2d)
	for _, p := range m.Parameters() {
		if g := p.Grad(); g == nil || g.DType() != vram.Float32 {
			t.Fatalf("gradient %v, want float32 for a float32 master", g)
		}
	}
	if bn.RunningMean.DType() != vram.Float32 {
		t.Fatalf("running mean %s", bn.RunningMean.DType())
	}
}

func TestReleaseFreesBuffers(t *testing.T) {
	d := vram.Sim(1)
	if !d.Available() {
		t.Skip("no sim:1")
	}
	memtest.Settle()
	base := vram.Storage(d).LiveBytes
	m := cnn(d)
	x := vram.Zeros(vram.Shape{2, 1, 12, 12}, d)
	m.Forward(x).Release()
	x.Release()
	nn.Release(m)
	memtest.Settle()
	if got := vram.Storage(d).LiveBytes - base; got > 0 {
		t.Fatalf("%d bytes live after nn.Release", got)
	}
	runtime.KeepAlive(m) // reachable, so only Release can have freed it
}

// TestSequentialFusesConvAct: a Conv2d followed by a ReLU or GELU runs as
// one op with the same result and gradients as the two layers.
func TestSequentialFusesConvAct(t *testing.T) {
	for _, act := range []nn.Module{nn.NewReLU(), nn.NewGELU()} {
		conv := nn.NewConv2d(3, 4, 3, nn.ConvOptions{Padding: 1}, vram.Float64)
		fused := nn.NewSequential(conv, act)
		x := vram.Randn(vram.Shape{2, 3, 5, 5}, vram.Float64)
		y := fused.Forward(x)
		// On the CPU the fused op ends in one bias-and-activation pass.
		if got := y.GradFn(); got != "bias_act" && got != "conv2d" {
			t.Errorf("%T: the output's grad_fn is %q, want the fused conv2d", act, got)
		}
		want := act.Forward(conv.Forward(x))
		checkValues(t, "fused", y.Float64s(), want.Float64s(), 1e-12)
		y.Sum().Backward()
		g := conv.Weight.Grad().Float64s()
		conv.Weight.ZeroGrad()
		want.Sum().Backward()
		checkValues(t, "fused weight gradient", g, conv.Weight.Grad().Float64s(), 1e-12)
	}
}

// TestConvTranspose2dForwardSize checks output_size: each reachable size
// gives the transposed convolution with the output padding that reaches
// it, and other sizes panic with ErrShape.
func TestConvTranspose2dForwardSize(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(4))
	l := nn.NewConvTranspose2d(3, 2, 3, nn.ConvOptions{StrideHW: [2]int{2, 3}, Padding: 1}, g)
	x := vram.Randn(vram.Shape{2, 3, 4, 5}, g)
	// Heights 7 to 8 (stride 2), widths 13 to 15 (stride 3).
	for _, tc := range []struct {
		h, w int
		ok   bool
	}{
		{7, 13, true}, {8, 13, true}, {7, 15, true}, {8, 14, true},
		{6, 13, false}, {9, 13, false}, {7, 12, false}, {7, 16, false},
	} {
		t.Run(fmt.Sprintf("%dx%d", tc.h, tc.w), func(t *testing.T) {
			var y *vram.Tensor
			err := vram.Catch(func() { y = l.ForwardSize(x, tc.h, tc.w) })
			if !tc.ok {
				if !errors.Is(err, vram.ErrShape) {
					t.Fatalf("error %v, want %v", err, vram.ErrShape)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := l.Params
			p.OutputPadding = [2]int{tc.h - 7, tc.w - 13}
			want := vram.ConvTranspose2d(x, l.Weight, l.Bias, p)
			if !slices.Equal(y.Shape(), vram.Shape{2, 2, tc.h, tc.w}) || !slices.Equal(y.Float64s(), want.Float64s()) {
				t.Errorf("shape %v, want [2, 2, %d, %d], or values differ", y.Shape(), tc.h, tc.w)
			}
			yu := l.ForwardSize(x.Select(0, 0), tc.h, tc.w)
			if !slices.Equal(yu.Shape(), vram.Shape{2, tc.h, tc.w}) {
				t.Errorf("unbatched shape %v", yu.Shape())
			}
		})
	}
}

// TestDropout2dMapsByRank checks which entries Dropout2d drops together:
// the H×W maps of a 4-D input [N, C, H, W], and the rows of a 3-D input,
// which PyTorch takes as [N, C, L] (channel-wise 1-D dropout), not as one
// image [C, H, W] whose first dimension would be dropped whole.
func TestDropout2dMapsByRank(t *testing.T) {
	cases := []struct {
		name  string
		shape vram.Shape
		batch int // N
		maps  int // maps per sample, C
		size  int // entries per map
	}{
		{"4-D", vram.Shape{8, 8, 2, 3}, 8, 8, 6},
		{"3-D", vram.Shape{8, 8, 5}, 8, 8, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := nn.NewDropout2d(0.5, vram.WithGenerator(vram.NewGenerator(3)))
			y := d.Forward(vram.Ones(c.shape)).Float64s()
			mixed := 0 // samples with both kept and dropped maps
			for n := range c.batch {
				kept, dropped := 0, 0
				for m := range c.maps {
					at := (n*c.maps + m) * c.size
					v := y[at]
					for i := range c.size {
						if y[at+i] != v {
							t.Fatalf("map %d of sample %d is partly dropped: %v", m, n, y[at:at+c.size])
						}
					}
					switch v {
					case 0:
						dropped++
					case 2:
						kept++
					default:
						t.Fatalf("map %d of sample %d scaled to %v, want 0 or 2", m, n, v)
					}
				}
				if kept > 0 && dropped > 0 {
					mixed++
				}
			}
			if mixed == 0 {
				t.Errorf("every sample of %v was kept or dropped whole; want one draw per channel of each sample", c.shape)
			}
		})
	}
}

// TestConvTranspose2dForwardSizeBadLayer checks that ForwardSize refuses a
// layer whose fields were set to what no convolution takes, a weight
// that is not 4-D or a stride, padding or dilation whose output sizes
// overflow an int, with an *vram.Error as Forward does, rather than
// indexing past the weight's shape or reporting wrapped sizes.
func TestConvTranspose2dForwardSizeBadLayer(t *testing.T) {
	x := vram.Ones(vram.Shape{1, 2, 4, 4})
	for _, tc := range []struct {
		name string
		set  func(l *nn.ConvTranspose2d)
		kind error
		msg  string // in the error
	}{
		{"3-D weight", func(l *nn.ConvTranspose2d) { l.Weight = vram.Ones(vram.Shape{2, 2, 3}) }, vram.ErrShape, ""},
		{"1-D weight", func(l *nn.ConvTranspose2d) { l.Weight = vram.Ones(vram.Shape{2}) }, vram.ErrShape, ""},
		{"nil weight", func(l *nn.ConvTranspose2d) { l.Weight = nil }, vram.ErrArgument, ""},
		{"huge stride", func(l *nn.ConvTranspose2d) { l.Params.Stride = [2]int{math.MaxInt, 1} }, vram.ErrShape, "overflow"},
		{"huge padding", func(l *nn.ConvTranspose2d) { l.Params.Padding = [2]int{1, math.MaxInt / 2} }, vram.ErrShape, "overflow"},
		{"huge dilation", func(l *nn.ConvTranspose2d) { l.Params.Dilation = [2]int{math.MaxInt / 2, 1} }, vram.ErrShape, "overflow"},
		{"negative stride", func(l *nn.ConvTranspose2d) { l.Params.Stride = [2]int{-2, 1} }, vram.ErrArgument, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := nn.NewConvTranspose2d(2, 2, 3, nn.ConvOptions{Stride: 2})
			tc.set(l)
			err := catchAll(func() { l.ForwardSize(x, 9, 9) })
			if !errors.Is(err, tc.kind) || !strings.Contains(fmt.Sprint(err), tc.msg) {
				t.Errorf("error %v, want %v saying %q", err, tc.kind, tc.msg)
			}
		})
	}
}

// catchAll is vram.Catch that also turns a panic that is not vram's own
// (a runtime error escaping the API) into an error, so that a table test
// reports it as a wrong error rather than crashing.
func catchAll(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic that is not a *vram.Error: %v", r)
		}
	}()
	return vram.Catch(f)
}
