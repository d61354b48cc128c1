package prune_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/internal/tensorfile"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/prune"
	"github.com/vramgo/vram/optim"
)

func TestMain(m *testing.M) {
	if err := vram.Configure(vram.Config{SimDevices: []int64{64 << 20}}); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// linear returns a Linear in→out whose weight holds vals (row-major).
func linear(t *testing.T, in, out int, vals []float32, opts ...vram.Option) *nn.Linear {
	t.Helper()
	l := nn.NewLinear(in, out, opts...)
	src := vram.FromSlice(vals, vram.Shape{out, in}, opts...)
	defer src.Release()
	vram.NoGrad(func() { l.Weight.CopyFrom(src) })
	return l
}

func maskOf(l *nn.Linear) []float64 {
	if l.WeightMask == nil {
		return nil
	}
	return l.WeightMask.Float64s()
}

func TestL1Unstructured(t *testing.T) {
	vals := []float32{0.1, -5, 0.3, 2, -0.05, 4, -1, 0.2}
	tests := []struct {
		name   string
		amount prune.Amount
		want   []float64
	}{
		{"half", prune.Fraction(0.5), []float64{0, 1, 0, 1, 0, 1, 1, 0}},
		{"none", prune.Fraction(0), []float64{1, 1, 1, 1, 1, 1, 1, 1}},
		{"all", prune.Fraction(1), []float64{0, 0, 0, 0, 0, 0, 0, 0}},
		{"count 3", prune.Count(3), []float64{0, 1, 1, 1, 0, 1, 1, 0}},
		{"rounds to even", prune.Fraction(0.3125), []float64{0, 1, 1, 1, 0, 1, 1, 1}}, // 2.5 -> 2
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := linear(t, 4, 2, vals)
			defer nn.Release(l)
			if err := prune.L1Unstructured(l, "weight", tc.amount); err != nil {
				t.Fatal(err)
			}
			if got := maskOf(l); !slices.Equal(got, tc.want) {
				t.Errorf("mask %v, want %v", got, tc.want)
			}
			if !prune.IsPruned(l, "weight") || prune.IsPruned(l, "bias") {
				t.Error("IsPruned is wrong")
			}
		})
	}
}

// TestMaskedForwardAndGrad checks that a pruned layer computes with the
// masked weight and that the pruned elements get a zero gradient while the
// parameter tensor stays the same leaf.
func TestMaskedForwardAndGrad(t *testing.T) {
	l := linear(t, 4, 2, []float32{0.1, -5, 0.3, 2, -0.05, 4, -1, 0.2})
	defer nn.Release(l)
	w := l.Weight
	if err := prune.L1Unstructured(l, "weight", prune.Fraction(0.5)); err != nil {
		t.Fatal(err)
	}
	if l.Weight != w || !w.RequiresGrad() {
		t.Fatal("pruning replaced the weight tensor or its requires_grad")
	}
	x := vram.FromSlice([]float32{1, 2, 3, 4, -1, 0.5, 2, 1}, vram.Shape{2, 4})
	defer x.Release()
	vram.Tidy(func() {
		y := l.Forward(x)
		wm := w.Mul(l.WeightMask)
		want := vram.Linear(x, wm, l.Bias)
		for i, v := range y.Float64s() {
			if math.Abs(v-want.Float64s()[i]) > 1e-5 {
				t.Fatalf("output %d: %v, want %v", i, v, want.Float64s()[i])
			}
		}
		y.Sum().Backward()
	})
	g := w.Grad().Float64s()
	for i, m := range maskOf(l) {
		if m == 0 && g[i] != 0 {
			t.Errorf("pruned element %d has gradient %v", i, g[i])
		}
		if m == 1 && g[i] == 0 {
			t.Errorf("kept element %d has no gradient", i)
		}
	}
}

func TestIterative(t *testing.T) {
	l := linear(t, 4, 2, []float32{8, 7, 6, 5, 4, 3, 2, 1})
	defer nn.Release(l)
	for _, want := range [][]float64{
		{1, 1, 1, 1, 0, 0, 0, 0}, // half of 8
		{1, 1, 0, 0, 0, 0, 0, 0}, // half of the 4 left
		{1, 0, 0, 0, 0, 0, 0, 0}, // half of 2
	} {
		if err := prune.L1Unstructured(l, "weight", prune.Fraction(0.5)); err != nil {
			t.Fatal(err)
		}
		if got := maskOf(l); !slices.Equal(got, want) {
			t.Errorf("mask %v, want %v", got, want)
		}
	}
	if err := prune.L1Unstructured(l, "weight", prune.Count(2)); err == nil {
		t.Error("a count above the elements left was accepted")
	}
	if got := maskOf(l); !slices.Equal(got, []float64{1, 0, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("a refused amount changed the mask to %v", got)
	}
	// Structured pruning after unstructured counts only rows left.
	if err := prune.LnStructured(l, "weight", prune.Fraction(1), 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := maskOf(l); !slices.Equal(got, make([]float64, 8)) {
		t.Errorf("mask %v, want all pruned", got)
	}
}

func TestBadArguments(t *testing.T) {
	l := linear(t, 2, 2, []float32{1, 2, 3, 4})
	defer nn.Release(l)
	ln := nn.NewMultiheadAttention(2, 1, nn.MultiheadAttentionOptions{})
	defer nn.Release(ln)
	tests := []struct {
		name string
		err  error
	}{
		{"negative fraction", prune.L1Unstructured(l, "weight", prune.Fraction(-0.1))},
		{"fraction above 1", prune.L1Unstructured(l, "weight", prune.Fraction(1.5))},
		{"NaN fraction", prune.L1Unstructured(l, "weight", prune.Fraction(math.NaN()))},
		{"negative count", prune.L1Unstructured(l, "weight", prune.Count(-1))},
		{"count too large", prune.L1Unstructured(l, "weight", prune.Count(5))},
		{"structured count too large", prune.LnStructured(l, "weight", prune.Count(3), 2, 0)},
		{"no such parameter", prune.L1Unstructured(l, "scale", prune.Fraction(0.5))},
		{"a mask", prune.L1Unstructured(l, "weight_mask", prune.Fraction(0.5))},
		{"not maskable", prune.L1Unstructured(ln, "in_proj_weight", prune.Fraction(0.5))},
		{"nil module", prune.L1Unstructured(nil, "weight", prune.Fraction(0.5))},
		{"NaN norm order", prune.LnStructured(l, "weight", prune.Fraction(0.5), math.NaN(), 0)},
		{"dimension out of range", prune.LnStructured(l, "weight", prune.Fraction(0.5), 2, 2)},
		{"negative dimension out of range", prune.LnStructured(l, "weight", prune.Fraction(0.5), 2, -3)},
		{"no targets", prune.GlobalUnstructured(nil, prune.Fraction(0.5))},
		{"target twice", prune.GlobalUnstructured([]prune.Target{{Module: l, Name: "weight"}, {Module: l, Name: "weight"}}, prune.Fraction(0.5))},
		{"remove unpruned", prune.Remove(l, "weight")},
	}
	for _, tc := range tests {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if l.WeightMask != nil || len(l.NamedParameters()) != 2 {
		t.Error("a refused call left a mask")
	}
}

func TestLnStructured(t *testing.T) {
	// Rows (output channels) of L2 norms 5, 1, 10 and 0.71; columns of L1
	// norms 10.5 and 12.5.
	vals := []float32{3, 4, 1, 0, 6, 8, 0.5, 0.5}
	tests := []struct {
		name   string
		amount prune.Amount
		n      float64
		dim    int
		want   []float64
	}{
		{"rows by L2", prune.Fraction(0.5), 2, 0, []float64{1, 1, 0, 0, 1, 1, 0, 0}},
		{"rows by max", prune.Count(1), math.Inf(1), 0, []float64{1, 1, 1, 1, 1, 1, 0, 0}},
		{"columns by L1", prune.Count(1), 1, 1, []float64{0, 1, 0, 1, 0, 1, 0, 1}},
		{"columns, negative dim", prune.Count(1), 1, -1, []float64{0, 1, 0, 1, 0, 1, 0, 1}},
		// torch.norm's other orders, which PyTorch's ln_structured takes:
		// 0 counts the non-zero values (2, 1, 2, 2), -Inf takes the
		// smallest magnitude (3, 0, 6, 0.5) and -1 gives (Σ|x|⁻¹)⁻¹
		// (1.71, 0, 3.43, 0.25).
		{"rows by count of non-zeros", prune.Count(1), 0, 0, []float64{1, 1, 0, 0, 1, 1, 1, 1}},
		{"rows by min", prune.Count(2), math.Inf(-1), 0, []float64{1, 1, 0, 0, 1, 1, 0, 0}},
		{"rows by L-1", prune.Count(2), -1, 0, []float64{1, 1, 0, 0, 1, 1, 0, 0}},
		{"rows by L-0.5", prune.Count(3), -0.5, 0, []float64{0, 0, 0, 0, 1, 1, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := linear(t, 2, 4, vals)
			defer nn.Release(l)
			if err := prune.LnStructured(l, "weight", tc.amount, tc.n, tc.dim); err != nil {
				t.Fatal(err)
			}
			if got := maskOf(l); !slices.Equal(got, tc.want) {
				t.Errorf("mask %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGlobalUnstructured(t *testing.T) {
	a := linear(t, 2, 2, []float32{0.1, 0.2, 0.3, 5})
	b := linear(t, 2, 2, []float32{4, 3, 2, 0.05})
	model := nn.NewSequential(a, nn.NewReLU(), b)
	defer nn.Release(model)
	targets := prune.Params(model, "weight")
	if len(targets) != 2 {
		t.Fatalf("Params found %d targets", len(targets))
	}
	if err := prune.GlobalUnstructured(targets, prune.Fraction(0.5)); err != nil {
		t.Fatal(err)
	}
	if got := maskOf(a); !slices.Equal(got, []float64{0, 0, 0, 1}) {
		t.Errorf("first layer mask %v", got)
	}
	if got := maskOf(b); !slices.Equal(got, []float64{1, 1, 1, 0}) {
		t.Errorf("second layer mask %v", got)
	}
	stats, total := prune.Sparsity(model)
	if total.Zeros != 4 || total.Total != 12 {
		t.Errorf("total sparsity %+v, want 4 zeros of 12", total)
	}
	names := []string{}
	for _, s := range stats {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"0.weight", "0.bias", "2.weight", "2.bias"}) {
		t.Errorf("sparsity lists %v", names)
	}
	if stats[0].Fraction() != 0.75 {
		t.Errorf("0.weight sparsity %v, want 0.75", stats[0].Fraction())
	}
}

// TestRemoveFreesMask checks on a sim device that a mask takes memory
// while the layer is pruned and that Remove gives it back, leaving zeros
// in the weight and no other copy.
func TestRemoveFreesMask(t *testing.T) {
	d := vram.Sim(0)
	memtest.Settle(d)
	l := nn.NewLinear(256, 512, d)
	defer nn.Release(l)
	base := vram.MemoryAllocated(d)
	if err := prune.LnStructured(l, "weight", prune.Fraction(0.25), 2, 0); err != nil {
		t.Fatal(err)
	}
	if err := prune.L1Unstructured(l, "bias", prune.Fraction(0.5)); err != nil {
		t.Fatal(err)
	}
	withMask := vram.MemoryAllocated(d) - base
	if want := l.Weight.Bytes() + l.Bias.Bytes(); withMask != want {
		t.Errorf("masks take %d bytes, want %d", withMask, want)
	}
	vram.NoGrad(func() {
		vram.Tidy(func() { l.Forward(vram.Ones(vram.Shape{4, 256}, d)) })
	})
	if got := vram.MemoryAllocated(d) - base; got != withMask {
		t.Errorf("a forward pass left %d bytes, want %d", got, withMask)
	}
	n, err := prune.RemoveAll(l)
	if err != nil || n != 2 {
		t.Fatalf("RemoveAll = %d, %v", n, err)
	}
	if got := vram.MemoryAllocated(d) - base; got != 0 {
		t.Errorf("%d bytes left after Remove, want 0", got)
	}
	if l.WeightMask != nil || len(l.NamedParameters()) != 2 {
		t.Error("the mask is still registered")
	}
	stats, _ := prune.Sparsity(l)
	if stats[0].Zeros != 128*256 || stats[1].Zeros != 256 {
		t.Errorf("after Remove: %+v", stats)
	}
}

// TestPrunedTraining checks that pruned elements stay out of the layer's
// computation through optimizer steps (AdamW with weight decay), and are
// zero after Remove; and that the masks move with the model.
func TestPrunedTraining(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(3))
	model := nn.NewSequential(nn.NewLinear(8, 16, g), nn.NewReLU(), nn.NewLinear(16, 2, g))
	defer nn.Release(model)
	opt, err := optim.NewAdamW(model.Parameters(), optim.AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	x := vram.Randn(vram.Shape{32, 8}, g)
	defer x.Release()
	step := func() {
		vram.Tidy(func() {
			opt.ZeroGrad()
			model.Forward(x).Square().Mean().Backward()
			opt.Step()
		})
	}
	step()
	if err := prune.GlobalUnstructured(prune.Params(model, "weight"), prune.Fraction(0.6)); err != nil {
		t.Fatal(err)
	}
	_, before := prune.Sparsity(model)
	for range 5 {
		step()
	}
	_, after := prune.Sparsity(model)
	if after.Zeros < before.Zeros {
		t.Errorf("training revived pruned weights: %d zeros, then %d", before.Zeros, after.Zeros)
	}
	model.To(vram.Sim(0))
	l := model.At(0).(*nn.Linear)
	if l.WeightMask.Device() != vram.Sim(0) {
		t.Errorf("the mask stayed on %s", l.WeightMask.Device())
	}
	vram.NoGrad(func() { vram.Tidy(func() { model.Forward(vram.Ones(vram.Shape{1, 8}, vram.Sim(0))) }) })
	model.To(vram.CPU)
	if _, err := prune.RemoveAll(model); err != nil {
		t.Fatal(err)
	}
	_, final := prune.Sparsity(model)
	if final.Zeros < before.Zeros {
		t.Errorf("after Remove %d zeros, want at least %d", final.Zeros, before.Zeros)
	}
}

// TestPruneQuantized checks that an int8 weight is refused.
func TestPruneQuantized(t *testing.T) {
	l := nn.NewLinear(4, 4)
	defer nn.Release(l)
	wq := vram.Zeros(vram.Shape{4, 4}, vram.Int8)
	if err := l.SetInt8Weight(wq, vram.Ones(vram.Shape{4})); err != nil {
		t.Fatal(err)
	}
	err := prune.L1Unstructured(l, "weight", prune.Fraction(0.5))
	if err == nil {
		t.Fatal("an int8 weight was pruned")
	}
	// prune's own check, not an int8 op failing inside.
	var ve *vram.Error
	if !errors.As(err, &ve) || ve.Op != "prune" || !errors.Is(err, vram.ErrDType) {
		t.Errorf("got %v; want prune's ErrDType error", err)
	}
}

// TestNaNPrunedLast checks that NaN values and NaN norms rank above every
// number, as in PyTorch's topk: the smallest finite values go first.
func TestNaNPrunedLast(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name  string
		vals  []float32 // a 2x2 weight
		prune func(l *nn.Linear) error
		want  []float64
	}{
		{"unstructured", []float32{1, nan, 3, 0.1}, func(l *nn.Linear) error {
			return prune.L1Unstructured(l, "weight", prune.Count(1))
		}, []float64{1, 1, 1, 0}},
		{"unstructured, all but the NaN", []float32{1, nan, 3, 0.1}, func(l *nn.Linear) error {
			return prune.L1Unstructured(l, "weight", prune.Count(3))
		}, []float64{0, 1, 0, 0}},
		{"unstructured, everything", []float32{nan, nan, 3, 0.1}, func(l *nn.Linear) error {
			return prune.L1Unstructured(l, "weight", prune.Fraction(1))
		}, []float64{0, 0, 0, 0}},
		{"structured rows", []float32{nan, 0, 3, 4}, func(l *nn.Linear) error {
			return prune.LnStructured(l, "weight", prune.Count(1), 2, 0)
		}, []float64{1, 1, 0, 0}},
		{"structured columns by max", []float32{nan, 5, 3, 4}, func(l *nn.Linear) error {
			return prune.LnStructured(l, "weight", prune.Count(1), math.Inf(1), 1)
		}, []float64{1, 0, 1, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := linear(t, 2, 2, tc.vals)
			defer nn.Release(l)
			if err := tc.prune(l); err != nil {
				t.Fatal(err)
			}
			if got := maskOf(l); !slices.Equal(got, tc.want) {
				t.Errorf("mask %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPruneReachesCheckpointedLayers checks that Params, Sparsity and
// RemoveAll find a Linear wrapped in nn.Checkpoint.
func TestPruneReachesCheckpointedLayers(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(3))
	plain, wrapped := nn.NewLinear(4, 4, g), nn.NewLinear(4, 4, g)
	model := nn.NewSequential(plain, nn.NewReLU(), nn.Checkpoint(wrapped))
	defer nn.Release(model)
	targets := prune.Params(model, "weight")
	tests := []struct {
		name string
		l    *nn.Linear
	}{{"plain", plain}, {"checkpointed", wrapped}}
	if len(targets) != len(tests) {
		t.Fatalf("Params found %d weights, want %d", len(targets), len(tests))
	}
	if err := prune.GlobalUnstructured(targets, prune.Fraction(0.5)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		if !prune.IsPruned(tt.l, "weight") {
			t.Errorf("%s layer not pruned", tt.name)
		}
	}
	if _, total := prune.Sparsity(model); total.Zeros != 16 {
		t.Errorf("sparsity %d zeros, want 16", total.Zeros)
	}
	x := vram.Randn(vram.Shape{2, 4}, g)
	defer x.Release()
	vram.Tidy(func() { model.Forward(x).Sum().Backward() })
	grad, mask := wrapped.Weight.Grad().Float64s(), wrapped.WeightMask.Float64s()
	for i := range grad {
		if mask[i] == 0 && grad[i] != 0 {
			t.Fatalf("pruned element %d of the checkpointed weight got gradient %v", i, grad[i])
		}
	}
	n, err := prune.RemoveAll(model)
	if err != nil || n != 2 {
		t.Fatalf("RemoveAll = %d, %v; want 2", n, err)
	}
}

// TestSavePrunedUsesPyTorchKeys checks that a pruned parameter is saved
// as name_orig beside name_mask, as PyTorch saves it, and that files with
// either key load back.
func TestSavePrunedUsesPyTorchKeys(t *testing.T) {
	dir := t.TempDir()
	model := func(seed uint64) *nn.Sequential {
		g := vram.WithGenerator(vram.NewGenerator(seed))
		return nn.NewSequential(nn.NewLinear(3, 4, g), nn.NewReLU(), nn.NewLinear(4, 2, g))
	}
	src := model(1)
	defer nn.Release(src)
	if err := prune.L1Unstructured(src.At(0), "weight", prune.Fraction(0.5)); err != nil {
		t.Fatal(err)
	}
	if err := prune.L1Unstructured(src.At(2), "bias", prune.Count(1)); err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{"0.bias", "0.weight_mask", "0.weight_orig", "2.bias_mask", "2.bias_orig", "2.weight"}
	var keys []string
	for k := range nn.StateDict(src) {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("StateDict keys %q, want %q", keys, wantKeys)
	}
	path := filepath.Join(dir, "pruned.safetensors")
	if err := nn.Save(src, path); err != nil {
		t.Fatal(err)
	}
	tensors, meta, err := tensorfile.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	keys = keys[:0]
	for k := range tensors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("saved keys %q, want %q", keys, wantKeys)
	}
	// The same values under the keys vram wrote before: name and name_mask.
	old := filepath.Join(dir, "old.safetensors")
	renamed := map[string]string{"0.weight_orig": "0.weight", "2.bias_orig": "2.bias"}
	for k, v := range renamed {
		tensors[v] = tensors[k]
		delete(tensors, k)
	}
	if err := tensorfile.Write(old, tensors, meta); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, path string
	}{
		{"name_orig keys", path},
		{"name keys", old},
	}
	for _, tt := range tests {
		dst := model(2)
		// The destination is pruned too, differently, as PyTorch needs
		// before loading a pruned state dict.
		if err := prune.L1Unstructured(dst.At(0), "weight", prune.Fraction(0.25)); err != nil {
			t.Fatal(err)
		}
		if err := prune.L1Unstructured(dst.At(2), "bias", prune.Count(2)); err != nil {
			t.Fatal(err)
		}
		if err := nn.Load(dst, tt.path); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		for name, want := range nn.StateDict(src) {
			got := nn.StateDict(dst)[name]
			if !slices.Equal(got.Float64s(), want.Float64s()) {
				t.Errorf("%s: %s = %v, want %v", tt.name, name, got.Float64s(), want.Float64s())
			}
		}
		nn.Release(dst)
	}

	// An unpruned model lacks the pruned keys, as in PyTorch.
	plain := model(3)
	defer nn.Release(plain)
	before := plain.At(0).(*nn.Linear).Weight.Float64s()
	if err := nn.Load(plain, path); err == nil {
		t.Fatal("a pruned file loaded strictly into an unpruned model")
	}
	res, err := nn.LoadNonStrict(plain, path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0.weight", "2.bias"}; !slices.Equal(res.Missing, want) {
		t.Errorf("missing %q, want %q", res.Missing, want)
	}
	if want := []string{"0.weight_mask", "0.weight_orig", "2.bias_mask", "2.bias_orig"}; !slices.Equal(res.Unexpected, want) {
		t.Errorf("unexpected %q, want %q", res.Unexpected, want)
	}
	if got := plain.At(0).(*nn.Linear).Weight.Float64s(); !slices.Equal(got, before) {
		t.Errorf("a missing key changed the weight")
	}
}

// TestErrorsWrapSentinels checks that each bad call returns an error
// matching one of vram's sentinel errors and changes nothing.
func TestErrorsWrapSentinels(t *testing.T) {
	l := nn.NewLinear(3, 2, vram.WithGenerator(vram.NewGenerator(1)))
	defer nn.Release(l)
	before := l.Weight.Float64s()
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"fraction above 1", prune.L1Unstructured(l, "weight", prune.Fraction(1.5)), vram.ErrArgument},
		{"negative fraction", prune.L1Unstructured(l, "weight", prune.Fraction(-0.1)), vram.ErrArgument},
		{"NaN fraction", prune.L1Unstructured(l, "weight", prune.Fraction(math.NaN())), vram.ErrArgument},
		{"negative count", prune.L1Unstructured(l, "weight", prune.Count(-1)), vram.ErrArgument},
		{"count above size", prune.L1Unstructured(l, "weight", prune.Count(7)), vram.ErrArgument},
		{"no such parameter", prune.L1Unstructured(l, "gamma", prune.Fraction(0.5)), vram.ErrArgument},
		{"not maskable", prune.L1Unstructured(nn.NewReLU(), "weight", prune.Fraction(0.5)), vram.ErrArgument},
		{"nil module", prune.L1Unstructured(nil, "weight", prune.Fraction(0.5)), vram.ErrArgument},
		{"no targets", prune.GlobalUnstructured(nil, prune.Fraction(0.5)), vram.ErrArgument},
		{"listed twice", prune.GlobalUnstructured([]prune.Target{{Module: l, Name: "weight"}, {Module: l, Name: "weight"}}, prune.Fraction(0.5)), vram.ErrArgument},
		{"norm order NaN", prune.LnStructured(l, "weight", prune.Fraction(0.5), math.NaN(), 0), vram.ErrArgument},
		{"dimension out of range", prune.LnStructured(l, "weight", prune.Fraction(0.5), 2, 2), vram.ErrIndex},
		{"remove unpruned", prune.Remove(l, "weight"), vram.ErrArgument},
		{"remove not maskable", prune.Remove(nn.NewReLU(), "weight"), vram.ErrArgument},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
	}
	if l.WeightMask != nil || !slices.Equal(l.Weight.Float64s(), before) {
		t.Errorf("a refused call changed the layer")
	}
}

// TestPruneConv2d checks that a Conv2d is pruned as a Linear is: its
// Forward computes with weight⊙mask and bias⊙mask in both memory formats,
// the pruned elements get no gradient, and Remove folds the mask in.
func TestPruneConv2d(t *testing.T) {
	tests := []struct {
		name   string
		prune  func(c *nn.Conv2d) error
		format vram.MemoryFormat
		zeros  int // pruned weight elements
	}{
		{"L1 unstructured", func(c *nn.Conv2d) error { return prune.L1Unstructured(c, "weight", prune.Fraction(0.5)) }, vram.ContiguousFormat, 27},
		{"output channels by L2 norm", func(c *nn.Conv2d) error { return prune.LnStructured(c, "weight", prune.Count(1), 2, 0) }, vram.ContiguousFormat, 27},
		{"channels last", func(c *nn.Conv2d) error { return prune.L1Unstructured(c, "weight", prune.Count(10)) }, vram.ChannelsLast, 10},
		{"bias", func(c *nn.Conv2d) error { return prune.L1Unstructured(c, "bias", prune.Count(1)) }, vram.ContiguousFormat, 0},
	}
	for _, tt := range tests {
		g := vram.WithGenerator(vram.NewGenerator(5))
		c := nn.NewConv2d(3, 2, 3, nn.ConvOptions{Padding: 1}, g)
		nn.ToMemoryFormat(c, tt.format)
		x := vram.Randn(vram.Shape{2, 3, 4, 4}, g).Contiguous(tt.format)
		if err := tt.prune(c); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		wm, bm := c.WeightMask, c.BiasMask
		if wm == nil {
			wm = vram.OnesLike(c.Weight)
			defer wm.Release()
		}
		if bm == nil {
			bm = vram.OnesLike(c.Bias)
			defer bm.Release()
		}
		if n := countZeros(wm.Float64s()); n != tt.zeros {
			t.Errorf("%s: %d weight elements pruned, want %d", tt.name, n, tt.zeros)
		}
		vram.Tidy(func() {
			var want *vram.Tensor
			vram.NoGrad(func() { want = vram.Conv2d(x, c.Weight.Mul(wm), c.Bias.Mul(bm), c.Params) })
			got := c.Forward(x)
			if !closeTo(got.Float64s(), want.Float64s(), 1e-5) {
				t.Errorf("%s: Forward of the pruned layer differs from conv(x, w⊙mask, b⊙mask)", tt.name)
			}
			got.Sum().Backward()
			gw, mw := c.Weight.Grad().Float64s(), wm.Float64s()
			for i := range gw {
				if mw[i] == 0 && gw[i] != 0 {
					t.Fatalf("%s: pruned weight element %d got gradient %v", tt.name, i, gw[i])
				}
			}
		})
		if err := func() error { _, err := prune.RemoveAll(c); return err }(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if c.WeightMask != nil || c.BiasMask != nil {
			t.Errorf("%s: masks left after RemoveAll", tt.name)
		}
		x.Release()
		nn.Release(c)
	}
}

func countZeros(v []float64) int {
	n := 0
	for _, x := range v {
		if x == 0 {
			n++
		}
	}
	return n
}

func closeTo(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol*(1+math.Abs(b[i])) {
			return false
		}
	}
	return true
}

// zerosOf counts the zeros of mask, and the rows (dim 0) and columns
// (dim 1) of a [rows, cols] mask that are all zeros.
func zerosOf(mask []float64, rows, cols int) (zeros, zeroRows, zeroCols int) {
	for r := range rows {
		all := true
		for c := range cols {
			if mask[r*cols+c] == 0 {
				zeros++
			} else {
				all = false
			}
		}
		if all {
			zeroRows++
		}
	}
	for c := range cols {
		all := true
		for r := range rows {
			all = all && mask[r*cols+c] == 0
		}
		if all {
			zeroCols++
		}
	}
	return zeros, zeroRows, zeroCols
}

// TestRandomPruning checks random_unstructured and random_structured:
// each step prunes the amount of what is left, whole slices for the
// structured one, composes with the mask before it, draws from the
// generator given (so that one seed gives one mask), and a bad amount
// changes nothing, not even the generator's state.
func TestRandomPruning(t *testing.T) {
	const rows, cols = 4, 5
	type step struct {
		structured bool
		dim        int
		amount     prune.Amount
		// after the step: zeros, all-zero rows, all-zero columns; -1 for
		// a count not checked.
		zeros, zeroRows, zeroCols int
		err                       bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"unstructured half, then half of the rest", []step{
			{false, 0, prune.Fraction(0.5), 10, -1, -1, false},
			{false, 0, prune.Fraction(0.5), 15, -1, -1, false},
			{false, 0, prune.Count(5), 20, 4, 5, false},
		}},
		{"unstructured nothing, everything", []step{
			{false, 0, prune.Count(0), 0, 0, 0, false},
			{false, 0, prune.Fraction(0), 0, 0, 0, false},
			{false, 0, prune.Fraction(1), 20, 4, 5, false},
			{false, 0, prune.Fraction(1), 20, 4, 5, false},
		}},
		{"unstructured bad amounts", []step{
			{false, 0, prune.Count(21), 0, 0, 0, true},
			{false, 0, prune.Fraction(1.5), 0, 0, 0, true},
			{false, 0, prune.Count(-1), 0, 0, 0, true},
			{false, 0, prune.Fraction(math.NaN()), 0, 0, 0, true},
			{false, 0, prune.Count(3), 3, -1, -1, false},
			{false, 0, prune.Count(18), 0, 0, 0, true},
		}},
		{"rows", []step{
			{true, 0, prune.Fraction(0.5), 10, 2, 0, false},
			{true, 0, prune.Count(1), 15, 3, 0, false},
			{true, 0, prune.Count(2), 0, 0, 0, true},
			{true, 0, prune.Count(1), 20, 4, 5, false},
		}},
		{"columns, negative dim", []step{
			{true, -1, prune.Count(2), 8, 0, 2, false},
			{true, 1, prune.Fraction(1.0 / 3), 12, 0, 3, false},
		}},
		{"structured bad dimension", []step{
			{true, 2, prune.Count(1), 0, 0, 0, true},
			{true, -3, prune.Count(1), 0, 0, 0, true},
		}},
	}
	for _, tt := range tests {
		for _, d := range []vram.Device{vram.CPU, vram.Sim(0)} {
			t.Run(tt.name+"/"+d.String(), func(t *testing.T) {
				masks := make([][]float64, 2)
				for run := range masks {
					vals := make([]float32, rows*cols)
					for i := range vals {
						vals[i] = float32(i + 1)
					}
					l := linear(t, cols, rows, vals, d)
					defer nn.Release(l)
					g := vram.NewGenerator(7)
					for i, s := range tt.steps {
						before := maskOf(l)
						var err error
						if s.structured {
							err = prune.RandomStructured(l, "weight", s.amount, s.dim, g)
						} else {
							err = prune.RandomUnstructured(l, "weight", s.amount, g)
						}
						if s.err {
							if !errors.Is(err, vram.ErrArgument) && !errors.Is(err, vram.ErrIndex) {
								t.Fatalf("step %d (%v): %v, want an error", i, s.amount, err)
							}
							if after := maskOf(l); !slices.Equal(after, before) {
								t.Fatalf("step %d: a failed call changed the mask from %v to %v", i, before, after)
							}
							continue
						}
						if err != nil {
							t.Fatalf("step %d (%v): %v", i, s.amount, err)
						}
						m := maskOf(l)
						for j := range before {
							if before[j] == 0 && m[j] != 0 {
								t.Fatalf("step %d: element %d was pruned and is not any more", i, j)
							}
						}
						z, zr, zc := zerosOf(m, rows, cols)
						if z != s.zeros || s.zeroRows >= 0 && zr != s.zeroRows || s.zeroCols >= 0 && zc != s.zeroCols {
							t.Fatalf("step %d (%v): %d zeros, %d zero rows, %d zero columns in %v; want %d, %d, %d", i, s.amount, z, zr, zc, m, s.zeros, s.zeroRows, s.zeroCols)
						}
					}
					masks[run] = maskOf(l)
				}
				if !slices.Equal(masks[0], masks[1]) {
					t.Fatalf("one seed gave two masks: %v and %v", masks[0], masks[1])
				}
			})
		}
	}
}

// TestRandomPruningDraws checks that the mask depends on the generator
// (another seed gives another mask), that a nil generator draws from
// vram.DefaultGenerator, and that a failing call draws nothing.
func TestRandomPruningDraws(t *testing.T) {
	mask := func(prep func(), g *vram.Generator) []float64 {
		l := linear(t, 8, 8, make([]float32, 64))
		defer nn.Release(l)
		prep()
		if err := prune.RandomUnstructured(l, "weight", prune.Fraction(0.5), g); err != nil {
			t.Fatal(err)
		}
		return maskOf(l)
	}
	none := func() {}
	a := mask(none, vram.NewGenerator(1))
	if b := mask(none, vram.NewGenerator(2)); slices.Equal(a, b) {
		t.Errorf("seeds 1 and 2 gave the same mask %v", a)
	}
	vram.ManualSeed(1)
	d1 := mask(none, nil)
	vram.ManualSeed(1)
	if d2 := mask(none, nil); !slices.Equal(d1, d2) {
		t.Errorf("nil generator after ManualSeed(1): %v, then %v", d1, d2)
	}
	g := vram.NewGenerator(1)
	failing := func() {
		l := linear(t, 2, 2, make([]float32, 4))
		defer nn.Release(l)
		if err := prune.RandomUnstructured(l, "weight", prune.Count(5), g); err == nil {
			t.Error("a count of 5 of 4 elements pruned")
		}
		if err := prune.RandomStructured(l, "weight", prune.Count(3), 0, g); err == nil {
			t.Error("a count of 3 of 2 rows pruned")
		}
	}
	if b := mask(failing, g); !slices.Equal(a, b) {
		t.Errorf("failing calls drew from the generator: mask %v, want %v", b, a)
	}
}

// TestReleasedParameter checks that every function given a parameter or
// mask that was released returns an error matching vram.ErrReleased
// rather than panicking, and that Sparsity of a nil module is empty.
func TestReleasedParameter(t *testing.T) {
	type layerFunc func() *nn.Linear
	releasedWeight := func() *nn.Linear {
		l := nn.NewLinear(3, 2)
		l.Weight.Release()
		return l
	}
	releasedMask := func() *nn.Linear {
		l := nn.NewLinear(3, 2)
		if err := prune.L1Unstructured(l, "weight", prune.Count(1)); err != nil {
			t.Fatal(err)
		}
		l.WeightMask.Release()
		return l
	}
	calls := []struct {
		name string
		call func(l *nn.Linear) error
	}{
		{"L1Unstructured", func(l *nn.Linear) error { return prune.L1Unstructured(l, "weight", prune.Count(1)) }},
		{"GlobalUnstructured", func(l *nn.Linear) error {
			return prune.GlobalUnstructured([]prune.Target{{Module: l, Name: "weight"}}, prune.Count(1))
		}},
		{"LnStructured", func(l *nn.Linear) error { return prune.LnStructured(l, "weight", prune.Count(1), 2, 0) }},
		{"RandomUnstructured", func(l *nn.Linear) error { return prune.RandomUnstructured(l, "weight", prune.Count(1), nil) }},
		{"RandomStructured", func(l *nn.Linear) error { return prune.RandomStructured(l, "weight", prune.Count(1), 0, nil) }},
	}
	for _, c := range calls {
		for _, lf := range []struct {
			name string
			make layerFunc
		}{{"released weight", releasedWeight}, {"released mask", releasedMask}} {
			t.Run(c.name+"/"+lf.name, func(t *testing.T) {
				l := lf.make()
				defer nn.Release(l)
				var err error
				if perr := vram.Catch(func() { err = c.call(l) }); perr != nil {
					t.Fatalf("panicked: %v", perr)
				}
				if !errors.Is(err, vram.ErrReleased) {
					t.Fatalf("got %v, want an error matching vram.ErrReleased", err)
				}
			})
		}
	}
	t.Run("Remove/released mask", func(t *testing.T) {
		l := releasedMask()
		defer nn.Release(l)
		if err := prune.Remove(l, "weight"); !errors.Is(err, vram.ErrReleased) {
			t.Fatalf("got %v, want an error matching vram.ErrReleased", err)
		}
	})
	t.Run("Sparsity/nil", func(t *testing.T) {
		params, total := prune.Sparsity(nil)
		if params != nil || total != (prune.Stat{Name: "total"}) {
			t.Fatalf("got %v, %v; want nothing", params, total)
		}
	})
}

// TestStructuredDimOutOfRangeNamesDim: the error of a dimension out of
// range names the dimension as given, not as counted from the end.
func TestStructuredDimOutOfRangeNamesDim(t *testing.T) {
	l := nn.NewLinear(4, 3)
	defer nn.Release(l)
	for _, dim := range []int{2, 5, -3, -7} {
		for _, err := range []error{
			prune.LnStructured(l, "weight", prune.Count(1), 2, dim),
			prune.RandomStructured(l, "weight", prune.Count(1), dim, vram.NewGenerator(1)),
		} {
			want := fmt.Sprintf("dimension %d is out of range", dim)
			if !errors.Is(err, vram.ErrIndex) || !strings.Contains(err.Error(), want) {
				t.Errorf("dim %d: got %v, want an error matching vram.ErrIndex that says %q", dim, err, want)
			}
		}
	}
	if prune.IsPruned(l, "weight") {
		t.Error("a refused pruning left a mask")
	}
}
