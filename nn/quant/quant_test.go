package quant_test

import (
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/quant"
	"github.com/vramgo/vram/optim"
)

func TestMain(m *testing.M) {
	if err := vram.Configure(vram.Config{SimDevices: []int64{128 << 20}}); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// teacherData returns n points in dim dimensions labelled by the argmax of
// a fixed random linear map to classes classes.
func teacherData(n, dim, classes int, seed uint64) (x, y *vram.Tensor) {
	g := vram.WithGenerator(vram.NewGenerator(seed))
	teacher := vram.Randn(vram.Shape{dim, classes}, vram.WithGenerator(vram.NewGenerator(99)))
	defer teacher.Release()
	x = vram.Randn(vram.Shape{n, dim}, g)
	s := x.MatMul(teacher)
	defer s.Release()
	return x, s.ArgMax(1, false)
}

func accuracy(model nn.Module, x, y *vram.Tensor) float64 {
	var acc float64
	vram.NoGrad(func() {
		vram.Tidy(func() {
			pred := model.Forward(x).ArgMax(1, false)
			acc = pred.Eq(y).Float().Mean().Item()
		})
	})
	return acc
}

func trainClassifier(t testing.TB) (model *nn.Sequential, xt, yt *vram.Tensor) {
	g := vram.WithGenerator(vram.NewGenerator(1))
	model = nn.NewSequential(nn.NewLinear(16, 64, g), nn.NewReLU(), nn.NewLinear(64, 64, g), nn.NewReLU(), nn.NewLinear(64, 4, g))
	x, y := teacherData(1024, 16, 4, 2)
	defer x.Release()
	defer y.Release()
	opt, err := optim.NewAdamW(model.Parameters(), optim.AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-4})
	if err != nil {
		t.Fatal(err)
	}
	for range 150 {
		vram.Tidy(func() {
			opt.ZeroGrad()
			nn.CrossEntropyLoss(model.Forward(x), y).Backward()
			opt.Step()
		})
	}
	xt, yt = teacherData(2048, 16, 4, 3)
	return model, xt, yt
}

// TestQuantizeAccuracy trains a small classifier on the CPU, quantizes it
// and checks that the test accuracy moves by at most one point and the
// logits by little.
func TestQuantizeAccuracy(t *testing.T) {
	model, xt, yt := trainClassifier(t)
	defer nn.Release(model)
	defer xt.Release()
	defer yt.Release()
	before := accuracy(model, xt, yt)
	if before < 0.9 {
		t.Fatalf("the float model reaches only %.3f", before)
	}
	var ref []float64
	vram.NoGrad(func() { vram.Tidy(func() { ref = model.Forward(xt).Float64s() }) })
	n, err := quant.Quantize(model)
	if err != nil || n != 3 {
		t.Fatalf("Quantize = %d, %v; want 3 layers", n, err)
	}
	after := accuracy(model, xt, yt)
	t.Logf("accuracy float32 %.4f, int8 %.4f", before, after)
	if math.Abs(after-before) > 0.01 {
		t.Errorf("accuracy moved from %.4f to %.4f", before, after)
	}
	var got []float64
	vram.NoGrad(func() { vram.Tidy(func() { got = model.Forward(xt).Float64s() }) })
	var num, den float64
	for i := range ref {
		num += (got[i] - ref[i]) * (got[i] - ref[i])
		den += ref[i] * ref[i]
	}
	rel := math.Sqrt(num / den)
	t.Logf("relative RMS change of the logits %.4f", rel)
	if rel > 0.02 {
		t.Errorf("relative RMS change of the logits %.4f", rel)
	}
	// A quantized model has no parameters left to train, and an int8
	// weight handed to an optimizer is refused clearly.
	if _, err := optim.NewAdamW(model.Parameters(), optim.AdamConfig{LR: 1e-3}); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("optimizer over the quantized model: %v, want an empty parameter list", err)
	}
	w8 := []*vram.Tensor{model.At(0).(*nn.Linear).Weight}
	if _, err := optim.NewAdamW(w8, optim.AdamConfig{LR: 1e-3}); !errors.Is(err, vram.ErrDType) || !strings.Contains(err.Error(), "int8") {
		t.Errorf("optimizer over an int8 weight: %v, want an error matching vram.ErrDType naming int8", err)
	}
	if err := vram.Catch(func() { model.At(0).(*nn.Linear).Weight.SetRequiresGrad(true) }); err == nil {
		t.Error("an int8 weight accepted requires_grad")
	}
}

// TestQuantizeMemory checks on a sim device that the weights take a
// quarter of their float32 bytes after Quantize, measured by the
// allocator, and that the quantized model still runs there.
func TestQuantizeMemory(t *testing.T) {
	d := vram.Sim(0)
	memtest.Settle()
	base := vram.MemoryAllocated(d)
	g := vram.WithGenerator(vram.NewGenerator(5))
	model := nn.NewSequential(nn.NewLinear(512, 1024, g, d), nn.NewReLU(), nn.NewLinear(1024, 512, g, d))
	defer nn.Release(model)
	floatBytes := vram.MemoryAllocated(d) - base
	var weightBytes int64
	for _, p := range model.NamedParameters() {
		if strings.HasSuffix(p.Name, "weight") {
			weightBytes += p.Tensor.Bytes()
		}
	}
	if _, err := quant.Quantize(model); err != nil {
		t.Fatal(err)
	}
	memtest.Settle()
	intBytes := vram.MemoryAllocated(d) - base
	// Weights 4x smaller; biases unchanged; one float32 scale per output.
	want := floatBytes - weightBytes + weightBytes/4 + (1024+512)*4
	if intBytes > want+4096 || intBytes < want-4096 {
		t.Errorf("parameters take %d bytes after quantization, want about %d (float32: %d)", intBytes, want, floatBytes)
	}
	var w8 int64
	for _, p := range nn.NamedBuffers(model) {
		if strings.HasSuffix(p.Name, "weight") {
			if p.Tensor.DType() != vram.Int8 {
				t.Errorf("%s is %s, want int8", p.Name, p.Tensor.DType())
			}
			w8 += p.Tensor.Bytes()
		}
	}
	if w8*4 != weightBytes {
		t.Errorf("int8 weights take %d bytes, float32 ones took %d: want a quarter", w8, weightBytes)
	}
	t.Logf("parameters on %s: float32 %d bytes, int8 %d bytes", d, floatBytes, intBytes)
	vram.NoGrad(func() {
		vram.Tidy(func() {
			y := model.Forward(vram.Ones(vram.Shape{8, 512}, d))
			if y.Shape()[1] != 512 {
				t.Errorf("output shape %v", y.Shape())
			}
		})
	})
}

// mlp is a user-defined module holding its layers in unexported fields.
type mlp struct {
	nn.Base
	fc1, fc2 *nn.Linear
}

func (m *mlp) Forward(x *vram.Tensor) *vram.Tensor {
	h := m.fc1.ForwardAct(x, vram.ActReLU)
	defer h.Release()
	return m.fc2.Forward(h)
}

// TestQuantizeCustomModule checks that layers in a module's own fields are
// quantized in place, that its Forward then runs on int8 weights close to
// the float result, and that gradients still reach the input.
func TestQuantizeCustomModule(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(7))
	m := &mlp{fc1: nn.NewLinear(8, 16, g), fc2: nn.NewLinear(16, 3, g)}
	m.RegisterModule("fc1", m.fc1)
	m.RegisterModule("fc2", m.fc2)
	defer nn.Release(m)
	x := vram.Randn(vram.Shape{5, 8}, g)
	defer x.Release()
	var ref []float64
	vram.Tidy(func() { ref = m.Forward(x).Float64s() })
	if n, err := quant.Quantize(m); n != 2 || err != nil {
		t.Fatalf("Quantize = %d, %v", n, err)
	}
	if m.fc1.Weight.DType() != vram.Int8 || m.fc1.Scale == nil {
		t.Fatal("fc1 was not quantized in place")
	}
	if n := len(m.Parameters()); n != 0 {
		t.Errorf("%d parameters after quantizing, want none", n)
	}
	names := []string{}
	for _, p := range nn.NamedBuffers(m) {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, " "); got != "fc1.weight fc1.bias fc1.scale fc2.weight fc2.bias fc2.scale" {
		t.Errorf("buffers %s", got)
	}
	vram.Tidy(func() {
		xg := x.Clone().SetRequiresGrad(true)
		y := m.Forward(xg)
		for i, v := range y.Float64s() {
			if math.Abs(v-ref[i]) > 0.02*(1+math.Abs(ref[i])) {
				t.Fatalf("output %d: %v, float %v", i, v, ref[i])
			}
		}
		y.Sum().Backward()
		if xg.Grad() == nil {
			t.Error("no gradient reached the input")
		}
	})
	if n, err := quant.Quantize(m); n != 0 || err != nil {
		t.Errorf("second Quantize = %d, %v; want 0 layers, no error", n, err)
	}
	if err := quant.QuantizeLinear(m.fc1); err == nil {
		t.Error("QuantizeLinear of a quantized layer: no error")
	}
}

// TestQuantizeRefusals checks the errors that leave the model unchanged.
func TestQuantizeRefusals(t *testing.T) {
	t.Run("nil keep", func(t *testing.T) {
		model := nn.NewSequential(nn.NewLinear(4, 4))
		defer nn.Release(model)
		if n, err := quant.QuantizeSelected(model, nil); !errors.Is(err, vram.ErrArgument) || n != 0 {
			t.Errorf("QuantizeSelected(m, nil) = %d, %v; want 0 and an ErrArgument error", n, err)
		}
		if p := model.Parameters()[0]; p.DType() != vram.Float32 {
			t.Errorf("a parameter became %s", p.DType())
		}
	})
	t.Run("nan", func(t *testing.T) {
		model := nn.NewSequential(nn.NewLinear(4, 4), nn.NewLinear(4, 2))
		defer nn.Release(model)
		vram.NoGrad(func() { model.At(1).(*nn.Linear).Weight.FillInPlace(math.NaN()) })
		if _, err := quant.Quantize(model); err == nil || !strings.Contains(err.Error(), "NaN") {
			t.Errorf("NaN weight: %v", err)
		}
		for _, p := range model.Parameters() {
			if p.DType() != vram.Float32 {
				t.Errorf("a parameter became %s although Quantize failed", p.DType())
			}
		}
	})
	t.Run("mask", func(t *testing.T) {
		l := nn.NewLinear(4, 4)
		defer nn.Release(l)
		if err := l.SetParameterMask("weight", vram.OnesLike(l.Weight)); err != nil {
			t.Fatal(err)
		}
		if err := quant.QuantizeLinear(l); err == nil || !strings.Contains(err.Error(), "prune.Remove") {
			t.Errorf("masked layer: %v", err)
		}
		if l.Weight.DType() != vram.Float32 {
			t.Error("the masked layer changed")
		}
	})
	t.Run("tied", func(t *testing.T) {
		emb := nn.NewEmbedding(10, 4)
		model := &tied{emb: emb, head: headWith(emb.Weight)}
		model.RegisterModule("emb", emb)
		model.RegisterModule("head", model.head)
		defer nn.Release(model)
		if _, err := quant.Quantize(model); err == nil || !strings.Contains(err.Error(), "emb.weight") {
			t.Errorf("weight tied to an embedding: %v", err)
		}
		if emb.Weight.DType() != vram.Float32 || emb.Weight.Released() {
			t.Error("the embedding's weight changed")
		}
	})
	t.Run("selected", func(t *testing.T) {
		model := nn.NewSequential(nn.NewLinear(4, 4), nn.NewReLU(), nn.NewLinear(4, 2))
		defer nn.Release(model)
		n, err := quant.QuantizeSelected(model, func(name string, _ *nn.Linear) bool { return name != "2" })
		if n != 1 || err != nil || model.At(2).(*nn.Linear).Weight.DType() != vram.Float32 {
			t.Errorf("QuantizeSelected = %d, %v; last layer %s", n, err, model.At(2).(*nn.Linear).Weight.DType())
		}
	})
	t.Run("shared", func(t *testing.T) {
		a := nn.NewLinearNoBias(4, 4)
		b := headWith(a.Weight)
		model := nn.NewSequential(a, b)
		defer nn.Release(model)
		if n, err := quant.Quantize(model); n != 2 || err != nil {
			t.Fatalf("shared weight: %d, %v", n, err)
		}
		if a.Weight != b.Weight || a.Scale != b.Scale {
			t.Error("layers that shared a weight got different int8 weights")
		}
		vram.NoGrad(func() { vram.Tidy(func() { model.Forward(vram.Ones(vram.Shape{1, 4})) }) })
	})
	if err := quant.QuantizeLinear(nil); err == nil {
		t.Error("nil layer: no error")
	}
	if _, _, err := quant.Weight(vram.Zeros(vram.Shape{3})); err == nil {
		t.Error("1-d weight: no error")
	}
}

// tied is a model whose output layer reuses the embedding's weight.
type tied struct {
	nn.Base
	emb  *nn.Embedding
	head *nn.Linear
}

func (m *tied) Forward(x *vram.Tensor) *vram.Tensor { return m.head.Forward(x) }

// headWith returns a Linear without bias whose weight is w.
func headWith(w *vram.Tensor) *nn.Linear {
	l := &nn.Linear{Weight: w}
	l.RegisterParameter("weight", w)
	return l
}

// TestWeightValues checks the quantized values and scales of a small
// weight, a row of zeros included.
func TestWeightValues(t *testing.T) {
	w := vram.FromSlice([]float32{1, -0.5, 0.25, 0, 0, 0, -2, 1, 0.01}, vram.Shape{3, 3})
	defer w.Release()
	wq, scale, err := quant.Weight(w)
	if err != nil {
		t.Fatal(err)
	}
	defer wq.Release()
	defer scale.Release()
	if got, want := wq.Int64s(), []int64{127, -64, 32, 0, 0, 0, -127, 64, 1}; !equal(got, want) {
		t.Errorf("int8 values %v, want %v", got, want)
	}
	s := scale.Float64s()
	if math.Abs(s[0]-1.0/127) > 1e-9 || s[1] != 1 || math.Abs(s[2]-2.0/127) > 1e-9 {
		t.Errorf("scales %v", s)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestConcurrentForward runs a quantized model's Forward from several
// goroutines at once, on the CPU and a sim device (run with -race), and
// checks every result against a sequential one.
func TestConcurrentForward(t *testing.T) {
	for _, d := range []vram.Device{vram.CPU, vram.Sim(0)} {
		g := vram.WithGenerator(vram.NewGenerator(9))
		model := nn.NewSequential(nn.NewLinear(64, 128, g, d), nn.NewReLU(), nn.NewLinear(128, 8, g, d))
		if _, err := quant.Quantize(model); err != nil {
			t.Fatal(err)
		}
		x := vram.Randn(vram.Shape{16, 64}, g, d)
		var want []float64
		vram.NoGrad(func() { vram.Tidy(func() { want = model.Forward(x).Float64s() }) })
		errs := make(chan string, 8)
		done := make(chan struct{})
		for range 4 {
			go func() {
				defer func() { done <- struct{}{} }()
				for range 10 {
					var got []float64
					vram.NoGrad(func() { vram.Tidy(func() { got = model.Forward(x).Float64s() }) })
					for i := range got {
						if got[i] != want[i] {
							errs <- "a concurrent forward pass differs"
							return
						}
					}
				}
			}()
		}
		for range 4 {
			<-done
		}
		close(errs)
		for e := range errs {
			t.Errorf("%s: %s", d, e)
		}
		x.Release()
		nn.Release(model)
	}
}

// TestSaveLoad checks that a quantized model's int8 weights and scales
// survive nn.Save and nn.Load (safetensors dtype I8) exactly.
func TestSaveLoad(t *testing.T) {
	build := func(seed uint64) *nn.Sequential {
		g := vram.WithGenerator(vram.NewGenerator(seed))
		m := nn.NewSequential(nn.NewLinear(8, 16, g), nn.NewReLU(), nn.NewLinear(16, 4, g))
		if _, err := quant.Quantize(m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := build(1), build(2)
	defer nn.Release(a)
	defer nn.Release(b)
	path := t.TempDir() + "/q.safetensors"
	if err := nn.Save(a, path); err != nil {
		t.Fatal(err)
	}
	if err := nn.Load(b, path); err != nil {
		t.Fatal(err)
	}
	pa, pb := nn.NamedBuffers(a), nn.NamedBuffers(b)
	if len(pa) != 6 || len(pb) != 6 {
		t.Fatalf("%d and %d buffers, want 6", len(pa), len(pb))
	}
	for i := range pa {
		if pb[i].Tensor.DType() != pa[i].Tensor.DType() {
			t.Errorf("%s: dtype %s, want %s", pa[i].Name, pb[i].Tensor.DType(), pa[i].Tensor.DType())
		}
		x, y := pa[i].Tensor.Float64s(), pb[i].Tensor.Float64s()
		for j := range x {
			if x[j] != y[j] {
				t.Fatalf("%s differs after the round trip", pa[i].Name)
			}
		}
	}
	// A float model does not take a quantized file.
	f := nn.NewSequential(nn.NewLinear(8, 16), nn.NewReLU(), nn.NewLinear(16, 4))
	defer nn.Release(f)
	if err := nn.Load(f, path); err == nil || !strings.Contains(err.Error(), "scale") {
		t.Errorf("loading a quantized file into a float model: %v", err)
	}
}

// TestReplicate checks that nn.Replicate copies a quantized layer with its
// int8 weight and scale, so that the replica computes the same.
func TestReplicate(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(4))
	l := nn.NewLinear(8, 4, g)
	defer nn.Release(l)
	if err := quant.QuantizeLinear(l); err != nil {
		t.Fatal(err)
	}
	r, err := nn.Replicate(l, vram.Sim(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nn.Release(r)
	rl := r.(*nn.Linear)
	if rl.Weight.DType() != vram.Int8 || rl.Scale == nil || rl.Scale.Device() != vram.Sim(0) || rl.Weight == l.Weight {
		t.Fatalf("replica: weight %s, scale %v", rl.Weight.DType(), rl.Scale)
	}
	x := vram.Randn(vram.Shape{3, 8}, g)
	defer x.Release()
	vram.NoGrad(func() {
		vram.Tidy(func() {
			a, b := l.Forward(x).Float64s(), r.Forward(x.To(vram.Sim(0))).Float64s()
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("replica output %d: %v, want %v", i, b[i], a[i])
				}
			}
		})
	})
}

// TestWeightTinyRows checks that a row of values too small for the scale
// max|w|/127 to be stored in the weight's dtype still quantizes to nonzero
// values, with the smallest scale the dtype holds, while a row of zeros gets
// scale 1.
func TestWeightTinyRows(t *testing.T) {
	tests := []struct {
		dt    vram.DType
		row   []float64
		scale float64
		q     []int64
	}{
		{vram.Float16, []float64{0x1p-20, -0x1p-21, 0x1p-24}, 0x1p-24, []int64{16, -8, 1}},
		{vram.Float16, []float64{0x1p-24, 0, 0}, 0x1p-24, []int64{1, 0, 0}},
		{vram.Float16, []float64{1, -0.5, 0}, 1.0 / 127, []int64{127, -64, 0}},
		{vram.Float16, []float64{0, 0, 0}, 1, []int64{0, 0, 0}},
		{vram.Float32, []float64{0x1p-145, 0, 0}, 0x1p-149, []int64{16, 0, 0}},
		{vram.BFloat16, []float64{0x1p-129, 0, 0}, 0x1p-133, []int64{16, 0, 0}},
		{vram.Float64, []float64{0x1p-1070, 0, 0}, 0x1p-1074, []int64{16, 0, 0}},
	}
	for _, tc := range tests {
		w := vram.FromSlice(tc.row, vram.Shape{1, len(tc.row)}, tc.dt)
		wq, scale, err := quant.Weight(w)
		w.Release()
		if err != nil {
			t.Fatal(err)
		}
		if got := scale.Float64s()[0]; math.Abs(got-tc.scale) > 2e-3*tc.scale {
			t.Errorf("%s %v: scale %g, want %g", tc.dt, tc.row, got, tc.scale)
		}
		if got := wq.Int64s(); !equal(got, tc.q) {
			t.Errorf("%s %v: int8 values %v, want %v", tc.dt, tc.row, got, tc.q)
		}
		wq.Release()
		scale.Release()
	}
}

// TestQuantizeReachesCheckpointedLayers checks that Quantize finds a
// Linear wrapped in nn.Checkpoint and that the model still runs.
func TestQuantizeReachesCheckpointedLayers(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(3))
	plain, wrapped := nn.NewLinear(4, 4, g), nn.NewLinear(4, 4, g)
	model := nn.NewSequential(plain, nn.NewReLU(), nn.Checkpoint(wrapped))
	defer nn.Release(model)
	x := vram.Randn(vram.Shape{2, 4}, g)
	defer x.Release()
	want := model.Forward(x)
	defer want.Release()
	n, err := quant.Quantize(model)
	if err != nil || n != 2 {
		t.Fatalf("Quantize = %d, %v; want 2", n, err)
	}
	tests := []struct {
		name string
		l    *nn.Linear
	}{{"plain", plain}, {"checkpointed", wrapped}}
	for _, tt := range tests {
		if tt.l.Weight.DType() != vram.Int8 || tt.l.Scale == nil {
			t.Errorf("%s layer not quantized: weight %v", tt.name, tt.l.Weight.DType())
		}
	}
	var got *vram.Tensor
	vram.NoGrad(func() { got = model.Forward(x) })
	defer got.Release()
	w, h := want.Float64s(), got.Float64s()
	for i := range w {
		if math.Abs(w[i]-h[i]) > 0.05 {
			t.Fatalf("quantized output %v, want about %v", h, w)
		}
	}
}

// TestWeightFiniteCheck checks that Weight refuses NaN and Inf with an
// error matching vram.ErrArgument and quantizes large finite values, whose
// sum of magnitudes overflows float32.
func TestWeightFiniteCheck(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name   string
		vals   []float32
		wantQ  []int64
		wantOK bool
	}{
		{"zeros", []float32{0, 0, 0, 0}, []int64{0, 0, 0, 0}, true},
		{"constant", []float32{3, 3, -3, -3}, []int64{127, 127, -127, -127}, true},
		{"near float32 max", []float32{3e38, -3e38, 3e38, 1.5e38}, []int64{127, -127, 127, 64}, true},
		{"NaN", []float32{1, nan, 2, 3}, nil, false},
		{"Inf", []float32{1, 2, -inf, 3}, nil, false},
	}
	for _, tt := range tests {
		w := vram.FromSlice(tt.vals, vram.Shape{2, 2})
		wq, scale, err := quant.Weight(w)
		switch {
		case !tt.wantOK:
			if !errors.Is(err, vram.ErrArgument) {
				t.Errorf("%s: %v, want an error matching vram.ErrArgument", tt.name, err)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
		default:
			if got := wq.Int64s(); !slices.Equal(got, tt.wantQ) {
				t.Errorf("%s: int8 values %v, want %v", tt.name, got, tt.wantQ)
			}
			for _, s := range scale.Float64s() {
				if !(s > 0) || math.IsInf(s, 0) {
					t.Errorf("%s: scale %v, want positive and finite", tt.name, s)
				}
			}
			wq.Release()
			scale.Release()
		}
		w.Release()
	}
	tests2 := []struct {
		name string
		err  error
		want error
	}{
		{"nil weight", func() error { _, _, err := quant.Weight(nil); return err }(), vram.ErrArgument},
		{"1-d weight", func() error { _, _, err := quant.Weight(vram.Zeros(vram.Shape{4})); return err }(), vram.ErrArgument},
		{"nil layer", quant.QuantizeLinear(nil), vram.ErrArgument},
		{"nil module", func() error { _, err := quant.Quantize(nil); return err }(), vram.ErrArgument},
		{"nil pointer module", func() error { var m *nn.Sequential; _, err := quant.Quantize(m); return err }(), vram.ErrArgument},
		{"nil pointer layer as module", func() error {
			var l *nn.Linear
			_, err := quant.QuantizeSelected(l, func(string, *nn.Linear) bool { return true })
			return err
		}(), vram.ErrArgument},
	}
	for _, tt := range tests2 {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
	}
}

// TestLoadRefusesQuantizedIntoFloat checks that a file and a model that
// disagree on which weights are quantized do not load, strict or not, and
// leave the model as it was: a float weight read into an int8 one became
// zeros, and int8 codes read into a float weight became weights about a
// hundred times too large, with LoadNonStrict reporting only a missing or
// unexpected "scale".
func TestLoadRefusesQuantizedIntoFloat(t *testing.T) {
	dir := t.TempDir()
	g := vram.WithGenerator(vram.NewGenerator(5))
	src := nn.NewLinear(3, 2, g)
	defer nn.Release(src)
	floatPath := dir + "/float.safetensors"
	if err := nn.Save(src, floatPath); err != nil {
		t.Fatal(err)
	}
	if err := quant.QuantizeLinear(src); err != nil {
		t.Fatal(err)
	}
	quantPath := dir + "/quant.safetensors"
	if err := nn.Save(src, quantPath); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		path      string
		quantized bool // whether the model loaded into is quantized
		strict    bool
	}{
		{"quantized file into float model", quantPath, false, true},
		{"quantized file into float model, non-strict", quantPath, false, false},
		{"float file into quantized model", floatPath, true, true},
		{"float file into quantized model, non-strict", floatPath, true, false},
	}
	for _, tt := range tests {
		for _, d := range []vram.Device{vram.CPU, vram.Sim(0)} {
			t.Run(tt.name+"/"+d.String(), func(t *testing.T) {
				m := nn.NewLinear(3, 2, vram.WithGenerator(vram.NewGenerator(6)), d)
				defer nn.Release(m)
				if tt.quantized {
					if err := quant.QuantizeLinear(m); err != nil {
						t.Fatal(err)
					}
				}
				before := m.Weight.Float64s()
				var err error
				if tt.strict {
					err = nn.Load(m, tt.path)
				} else {
					_, err = nn.LoadNonStrict(m, tt.path)
				}
				if !errors.Is(err, vram.ErrDType) || !strings.Contains(err.Error(), `"weight"`) {
					t.Fatalf("load: %v; want an error matching vram.ErrDType naming \"weight\"", err)
				}
				if after := m.Weight.Float64s(); !slices.Equal(after, before) {
					t.Fatalf("the weight changed from %v to %v", before, after)
				}
			})
		}
	}
}

// TestQuantizeReleasedBias checks that a layer whose bias was released is refused with an error matching vram.ErrReleased before
// anything changes: the layer used to get its int8 weight and then panic
// on the bias, keeping both weights.
func TestQuantizeReleasedBias(t *testing.T) {
	tests := []struct {
		name     string
		release  func(l *nn.Linear)
		quantize func(l *nn.Linear) error
	}{
		{"QuantizeLinear, bias", func(l *nn.Linear) { l.Bias.Release() }, quant.QuantizeLinear},
		{"Quantize, bias", func(l *nn.Linear) { l.Bias.Release() }, func(l *nn.Linear) error {
			_, err := quant.Quantize(nn.NewSequential(l))
			return err
		}},
		{"SetInt8Weight, bias", func(l *nn.Linear) { l.Bias.Release() }, func(l *nn.Linear) error {
			return l.SetInt8Weight(vram.Zeros(vram.Shape{2, 3}, vram.Int8), vram.Ones(vram.Shape{2}))
		}},
		{"SetInt8Weight, released scale", func(*nn.Linear) {}, func(l *nn.Linear) error {
			s := vram.Ones(vram.Shape{2})
			s.Release()
			return l.SetInt8Weight(vram.Zeros(vram.Shape{2, 3}, vram.Int8), s)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := nn.NewLinear(3, 2)
			defer nn.Release(l)
			tt.release(l)
			w := l.Weight
			var err error
			if perr := vram.Catch(func() { err = tt.quantize(l) }); perr != nil {
				t.Fatalf("panicked: %v", perr)
			}
			if !errors.Is(err, vram.ErrReleased) {
				t.Fatalf("got %v, want an error matching vram.ErrReleased", err)
			}
			if l.Weight != w || l.Scale != nil {
				t.Fatalf("the layer changed: weight %v, scale %v", l.Weight, l.Scale)
			}
		})
	}
}
