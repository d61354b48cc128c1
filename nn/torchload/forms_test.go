package torchload

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/half"
	"github.com/vramgo/vram/nn"
)

// TestLoadPyTorchForms loads a Linear(2, 2) from the shapes in which
// torch.save writes tensors: views of one storage at offsets, a
// transposed weight saved as it is, a weight expanded from one value,
// parameters, tensors of other dtypes, and the legacy format. Each loads
// the values PyTorch would.
func TestLoadPyTorchForms(t *testing.T) {
	f16 := make([]uint16, 4)
	bf16 := make([]uint16, 2)
	for i, v := range []float32{0, 1, 2, 3} {
		f16[i] = half.F16(v)
	}
	for i, v := range []float32{4, 5} {
		bf16[i] = half.BF16(v)
	}
	fused := le([]float32{0, 1, 2, 3, 4, 5}) // weight and bias in one storage
	w := tens{key: "0", class: "FloatStorage", numel: 6, size: []int64{2, 2}, stride: []int64{2, 1}}
	b := tens{key: "0", class: "FloatStorage", numel: 6, offset: 4, size: []int64{2}, stride: []int64{1}}
	wp, bp := w, b
	wp.param, bp.param = true, true
	tests := []struct {
		name   string
		root   odict
		store  map[string][]byte
		legacy map[string]int // element sizes of a legacy file; nil: zip
		weight []float64
		bias   []float64
	}{
		{name: "one storage at offsets", root: odict{{"weight", w}, {"bias", b}}, store: map[string][]byte{"0": fused},
			weight: []float64{0, 1, 2, 3}, bias: []float64{4, 5}},
		{name: "parameters", root: odict{{"weight", wp}, {"bias", bp}}, store: map[string][]byte{"0": fused},
			weight: []float64{0, 1, 2, 3}, bias: []float64{4, 5}},
		{name: "transposed", root: odict{
			{"weight", tens{key: "0", class: "FloatStorage", numel: 6, size: []int64{2, 2}, stride: []int64{1, 2}}}, {"bias", b}},
			store: map[string][]byte{"0": fused}, weight: []float64{0, 2, 1, 3}, bias: []float64{4, 5}},
		{name: "expanded", root: odict{
			{"weight", tens{key: "0", class: "FloatStorage", numel: 6, offset: 5, size: []int64{2, 2}, stride: []int64{0, 0}}}, {"bias", b}},
			store: map[string][]byte{"0": fused}, weight: []float64{5, 5, 5, 5}, bias: []float64{4, 5}},
		{name: "float16 and bfloat16", root: odict{
			{"weight", tens{key: "h", class: "HalfStorage", numel: 4, size: []int64{2, 2}, stride: []int64{2, 1}}},
			{"bias", tens{key: "b", class: "BFloat16Storage", numel: 2, size: []int64{2}, stride: []int64{1}}}},
			store: map[string][]byte{"h": le(f16), "b": le(bf16)}, weight: []float64{0, 1, 2, 3}, bias: []float64{4, 5}},
		{name: "float64 and int16", root: odict{
			{"weight", tens{key: "d", class: "DoubleStorage", numel: 4, size: []int64{2, 2}, stride: []int64{2, 1}}},
			{"bias", tens{key: "s", class: "ShortStorage", numel: 2, size: []int64{2}, stride: []int64{1}}}},
			store: map[string][]byte{"d": le([]float64{0, 1, 2, 3}), "s": le([]int16{-4, 5})}, weight: []float64{0, 1, 2, 3}, bias: []float64{-4, 5}},
		{name: "legacy", root: odict{{"weight", wp}, {"bias", b}}, store: map[string][]byte{"0": fused}, legacy: map[string]int{"0": 4},
			weight: []float64{0, 1, 2, 3}, bias: []float64{4, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := archiveOf(t, tt.root, tt.store)
			if tt.legacy != nil {
				file = legacyOf(tt.root, tt.store, tt.legacy)
			}
			path := filepath.Join(t.TempDir(), "m.pt")
			if err := os.WriteFile(path, file, 0o644); err != nil {
				t.Fatal(err)
			}
			lin := nn.NewLinear(2, 2)
			defer nn.Release(lin)
			if _, err := LoadPyTorch(lin, path, true); err != nil {
				t.Fatal(err)
			}
			if got := lin.Weight.Float64s(); !slices.Equal(got, tt.weight) {
				t.Errorf("weight %v, want %v", got, tt.weight)
			}
			if got := lin.Bias.Float64s(); !slices.Equal(got, tt.bias) {
				t.Errorf("bias %v, want %v", got, tt.bias)
			}
		})
	}
}

// TestLoadPyTorchScalar loads a 0-d tensor, BatchNorm's
// num_batches_tracked, saved as a view of a larger storage.
func TestLoadPyTorchScalar(t *testing.T) {
	bn := nn.NewBatchNorm1d(2)
	defer nn.Release(bn)
	vec := func(key string, off int64) tens {
		return tens{key: key, class: "FloatStorage", numel: 8, offset: off, size: []int64{2}, stride: []int64{1}}
	}
	root := odict{{"weight", vec("f", 0)}, {"bias", vec("f", 2)}, {"running_mean", vec("f", 4)}, {"running_var", vec("f", 6)},
		{"num_batches_tracked", tens{key: "n", class: "LongStorage", numel: 3, offset: 2, size: []int64{}, stride: []int64{}}}}
	path := filepath.Join(t.TempDir(), "bn.pt")
	file := archiveOf(t, root, map[string][]byte{"f": le(seq(8)), "n": le([]int64{1, 2, 42})})
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPyTorch(bn, path, true); err != nil {
		t.Fatal(err)
	}
	sd := nn.StateDict(bn)
	if got := sd["num_batches_tracked"]; got.Item() != 42 || len(got.Shape()) != 0 {
		t.Errorf("num_batches_tracked %v of shape %v, want 42 of shape []", got.Item(), got.Shape())
	}
	if got := sd["running_var"].Float64s(); !slices.Equal(got, []float64{6, 7}) {
		t.Errorf("running_var %v", got)
	}
}

// TestLoadPyTorchBadFileChangesNothing loads files whose weight reads and
// whose bias does not (a record with a wrong checksum, cut short, missing,
// or beyond Options.MaxBytes): the error leaves the model as it was,
// though tensors are read from the file one at a time as they load.
func TestLoadPyTorchBadFileChangesNothing(t *testing.T) {
	root := odict{{"weight", f32("0", 2, 2)}, {"bias", f32("1", 2)}}
	good := map[string][]byte{"0": le([]float32{1, 2, 3, 4}), "1": le([]float32{5, 6})}
	tests := []struct {
		name string
		file func() []byte
		opts Options
	}{
		{name: "bad checksum", file: func() []byte {
			f := archiveOf(t, root, good)
			i := bytes.Index(f, good["1"])
			f[i] ^= 1
			return f
		}},
		{name: "missing record", file: func() []byte { return archiveOf(t, root, map[string][]byte{"0": good["0"]}) }},
		{name: "short record", file: func() []byte {
			return archiveOf(t, root, map[string][]byte{"0": good["0"], "1": good["1"][:4]})
		}},
		{name: "beyond MaxBytes", file: func() []byte { return archiveOf(t, root, good) }, opts: Options{MaxBytes: 40}},
		{name: "legacy missing storage", file: func() []byte {
			return legacyOf(root, map[string][]byte{"0": good["0"]}, map[string]int{"0": 4})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.pt")
			if err := os.WriteFile(path, tt.file(), 0o644); err != nil {
				t.Fatal(err)
			}
			lin := nn.NewLinear(2, 2)
			defer nn.Release(lin)
			before := lin.Weight.Float64s()
			_, err := LoadPyTorchOptions(lin, path, true, tt.opts)
			if !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("error %v, want vram.ErrArgument", err)
			}
			if got := lin.Weight.Float64s(); !slices.Equal(got, before) {
				t.Errorf("a failed load changed the weight to %v", got)
			}
		})
	}
}
