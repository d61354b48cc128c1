package nn_test

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/safetensors"
	"github.com/vramgo/vram/nn"
)

// bnFile writes a batch-norm state dict of two channels under prefix,
// without the keys in leave.
func bnFile(t *testing.T, prefix string, leave ...string) string {
	t.Helper()
	f32 := func(vals ...float32) safetensors.Tensor {
		var b []byte
		for _, v := range vals {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return safetensors.Tensor{DType: "F32", Shape: []int{len(vals)}, Data: b}
	}
	all := map[string]safetensors.Tensor{
		"weight":              f32(2, 3),
		"bias":                f32(4, 5),
		"running_mean":        f32(6, 7),
		"running_var":         f32(8, 9),
		"num_batches_tracked": {DType: "I64", Shape: []int{}, Data: binary.LittleEndian.AppendUint64(nil, 11)},
	}
	tensors := map[string]safetensors.Tensor{}
	for k, v := range all {
		if !slices.Contains(leave, k) {
			tensors[prefix+k] = v
		}
	}
	return safetensorsFile(t, tensors)
}

// safetensorsFile writes tensors to a safetensors file in a temporary
// directory and returns its path.
func safetensorsFile(t *testing.T, tensors map[string]safetensors.Tensor) string {
	t.Helper()
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.safetensors")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func bn2d() (nn.Module, *nn.BatchNorm2d) { l := nn.NewBatchNorm2d(2); return l, l }

// TestLoadWithoutNumBatchesTracked loads batch-norm files that lack
// num_batches_tracked, as files from before PyTorch 0.4.1 do: PyTorch
// loads them strictly and keeps the counter, and so must Load.
func TestLoadWithoutNumBatchesTracked(t *testing.T) {
	tests := []struct {
		name   string
		bn     func() (nn.Module, *nn.BatchNorm2d)
		prefix string // of the keys in the file and of the module in the model
		leave  []string
		strict bool
		want   error // nil, or the kind of Load's error
	}{
		{"2d strict", bn2d, "", []string{"num_batches_tracked"}, true, nil},
		{"1d strict", func() (nn.Module, *nn.BatchNorm2d) { l := nn.NewBatchNorm1d(2); return l, &l.BatchNorm2d }, "", []string{"num_batches_tracked"}, true, nil},
		{"nested strict", bn2d, "0.", []string{"num_batches_tracked"}, true, nil},
		{"non-strict", bn2d, "0.", []string{"num_batches_tracked"}, false, nil},
		{"running mean still needed", bn2d, "", []string{"num_batches_tracked", "running_mean"}, true, vram.ErrArgument},
		{"no running stats", func() (nn.Module, *nn.BatchNorm2d) {
			l := nn.NewBatchNorm2dOptions(2, nn.BatchNormOptions{NoRunningStats: true})
			return l, l
		}, "", []string{"num_batches_tracked", "running_mean", "running_var"}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, bn := tt.bn()
			if tt.prefix != "" {
				m = nn.NewSequential(m)
			}
			if bn.NumBatchesTracked != nil {
				bn.NumBatchesTracked.SetRawBytes(binary.LittleEndian.AppendUint64(nil, 7))
			}
			path := bnFile(t, tt.prefix, tt.leave...)
			var err error
			if tt.strict {
				err = nn.Load(m, path)
			} else {
				var res nn.LoadResult
				res, err = nn.LoadNonStrict(m, path)
				if len(res.Missing) != 0 || len(res.Unexpected) != 0 {
					t.Errorf("missing %q, unexpected %q; want none", res.Missing, res.Unexpected)
				}
			}
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("Load = %v, want an error matching %v", err, tt.want)
				}
				if got := bn.Weight.Float64s(); !slices.Equal(got, []float64{1, 1}) {
					t.Errorf("a failed Load changed the weight to %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := bn.Weight.Float64s(); !slices.Equal(got, []float64{2, 3}) {
				t.Errorf("weight %v, want [2 3]", got)
			}
			if bn.NumBatchesTracked != nil {
				if got := bn.NumBatchesTracked.Int64s(); got[0] != 7 {
					t.Errorf("num_batches_tracked %v, want the 7 it had", got)
				}
			}
		})
	}
}

// TestLoadConvertsIntegers loads integer and float tensors of the file
// into buffers of other dtypes: integers convert exactly (not through
// float64's 53 bits), floats truncate toward zero, and a value that does
// not fit is an error matching vram.ErrArgument that changes nothing.
func TestLoadConvertsIntegers(t *testing.T) {
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	tests := []struct {
		name string
		st   safetensors.Tensor
		dt   vram.DType
		want int64 // the value loaded, when err is false
		err  bool
	}{
		{"U64 above 2^53 into int64", safetensors.Tensor{DType: "U64", Data: u64(1<<53 + 1)}, vram.Int64, 1<<53 + 1, false},
		{"U64 above int64", safetensors.Tensor{DType: "U64", Data: u64(1 << 63)}, vram.Int64, 0, true},
		{"I64 into int32", safetensors.Tensor{DType: "I64", Data: u64(1<<31 - 1)}, vram.Int32, 1<<31 - 1, false},
		{"I64 above int32", safetensors.Tensor{DType: "I64", Data: u64(1 << 31)}, vram.Int32, 0, true},
		{"I64 below int32", safetensors.Tensor{DType: "I64", Data: u64(^uint64(1<<31+1) + 1)}, vram.Int32, 0, true},
		{"I32 -1 into int64", safetensors.Tensor{DType: "I32", Data: []byte{0xff, 0xff, 0xff, 0xff}}, vram.Int64, -1, false},
		{"U8 into int8", safetensors.Tensor{DType: "U8", Data: []byte{200}}, vram.Int8, 0, true},
		{"BOOL 2 into int64", safetensors.Tensor{DType: "BOOL", Data: []byte{2}}, vram.Int64, 1, false},
		{"F32 -1.75 into int64", safetensors.Tensor{DType: "F32", Data: binary.LittleEndian.AppendUint32(nil, math.Float32bits(-1.75))}, vram.Int64, -1, false},
		{"F32 NaN into int64", safetensors.Tensor{DType: "F32", Data: binary.LittleEndian.AppendUint32(nil, 0x7fc00000)}, vram.Int64, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.st.Shape = []int{}
			path := safetensorsFile(t, map[string]safetensors.Tensor{"a": tt.st, "b": tt.st})
			m := &stateBag{}
			a := vram.Full(vram.Shape{}, 5, tt.dt)
			m.RegisterBuffer("a", a)
			m.RegisterBuffer("b", vram.Full(vram.Shape{}, 5, tt.dt))
			err := nn.Load(m, path)
			if tt.err {
				if !errors.Is(err, vram.ErrArgument) {
					t.Fatalf("Load = %v, want an error matching vram.ErrArgument", err)
				}
				if got := a.Int64s()[0]; got != 5 {
					t.Errorf("a failed Load changed a to %d", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Int64s()[0]; got != tt.want {
				t.Errorf("loaded %d, want %d", got, tt.want)
			}
		})
	}
}

// TestLoadSharedWeights loads a model whose two layers share a weight from
// files that name it as PyTorch's state_dict does (under both names) and
// as safetensors.torch.save_model does (under one of them).
func TestLoadSharedWeights(t *testing.T) {
	f32 := func(shape []int, vals ...float32) safetensors.Tensor {
		var b []byte
		for _, v := range vals {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return safetensors.Tensor{DType: "F32", Shape: shape, Data: b}
	}
	w := f32([]int{1, 2}, 3, 4)
	bias := f32([]int{1}, 5)
	tests := []struct {
		name       string
		file       map[string]safetensors.Tensor
		strict     bool
		want       error    // nil, or the kind of Load's error
		unexpected []string // of LoadNonStrict
	}{
		{"both names", map[string]safetensors.Tensor{"enc.weight": w, "enc.bias": bias, "dec.weight": w}, true, nil, nil},
		{"first name only", map[string]safetensors.Tensor{"enc.weight": w, "enc.bias": bias}, true, nil, nil},
		{"other name only", map[string]safetensors.Tensor{"dec.weight": w, "enc.bias": bias}, true, nil, nil},
		{"other name misshapen", map[string]safetensors.Tensor{"enc.weight": w, "enc.bias": bias, "dec.weight": f32([]int{2}, 3, 4)}, true, vram.ErrShape, nil},
		{"non-strict", map[string]safetensors.Tensor{"dec.weight": w, "enc.bias": bias, "extra": bias}, false, nil, []string{"extra"}},
		{"neither name", map[string]safetensors.Tensor{"enc.bias": bias}, true, vram.ErrArgument, nil},
		// Loading one of two different values would lose the other
		// without a word: the file is not of a model whose weights are
		// tied.
		{"names with different values", map[string]safetensors.Tensor{"enc.weight": w, "enc.bias": bias, "dec.weight": f32([]int{1, 2}, 3, 5)}, true, vram.ErrArgument, nil},
		{"names with different values, non-strict", map[string]safetensors.Tensor{"enc.weight": w, "enc.bias": bias, "dec.weight": f32([]int{1, 2}, 3, 5)}, false, vram.ErrArgument, nil},
		{"names with the same values in two dtypes", map[string]safetensors.Tensor{"enc.weight": w, "enc.bias": bias,
			"dec.weight": {DType: "F64", Shape: []int{1, 2}, Data: binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.Float64bits(3)), math.Float64bits(4))}}, true, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := nn.NewLinear(2, 1)
			dec := &stateBag{}
			dec.RegisterParameter("weight", enc.Weight)
			root := &stateBag{}
			root.RegisterModule("enc", enc)
			root.RegisterModule("dec", dec)
			before := enc.Weight.Float64s()

			path := safetensorsFile(t, tt.file)
			var err error
			if tt.strict {
				err = nn.Load(root, path)
			} else {
				var res nn.LoadResult
				res, err = nn.LoadNonStrict(root, path)
				if len(res.Missing) != 0 || !slices.Equal(res.Unexpected, tt.unexpected) {
					t.Errorf("missing %q, unexpected %q; want none and %q", res.Missing, res.Unexpected, tt.unexpected)
				}
			}
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("Load = %v, want an error matching %v", err, tt.want)
				}
				if got := enc.Weight.Float64s(); !slices.Equal(got, before) {
					t.Errorf("a failed Load changed the weight to %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := enc.Weight.Float64s(); !slices.Equal(got, []float64{3, 4}) {
				t.Errorf("weight %v, want [3 4]", got)
			}
			if got := enc.Bias.Float64s(); !slices.Equal(got, []float64{5}) {
				t.Errorf("bias %v, want [5]", got)
			}
		})
	}
}

// TestLoadErrorListsFewKeys loads files with many keys the model lacks:
// the error names a few and counts the rest, while LoadNonStrict reports
// them all.
func TestLoadErrorListsFewKeys(t *testing.T) {
	tests := []struct {
		name   string
		extra  int
		want   string // in the error
		prefix string // of the extra keys, "x" if empty
	}{
		{"one", 1, `unexpected keys ["x0000"]`, ""},
		{"twenty", 20, `"x0019"]`, ""},
		{"twenty-one", 21, `"x0019", and 1 more]`, ""},
		{"thousands", 5000, `"x0019", and 4980 more]`, ""},
		{"long keys", 3, `unexpected keys ["yyyy`, strings.Repeat("y", 1<<20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := nn.NewLinear(1, 1)
			tensors := map[string]safetensors.Tensor{}
			for k, v := range nn.StateDict(m) {
				tensors[k] = safetensors.Tensor{DType: "F32", Shape: []int(v.Shape()), Data: v.RawBytes()}
			}
			for i := range tt.extra {
				tensors[cmp.Or(tt.prefix, "x")+fmt.Sprintf("%04d", i)] = safetensors.Tensor{DType: "U8", Shape: []int{0}}
			}
			path := safetensorsFile(t, tensors)
			err := nn.Load(m, path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || len(err.Error()) > 1000 {
				t.Errorf("Load = %.2000v, want an error of at most 1000 bytes containing %q", err, tt.want)
			}
			res, err := nn.LoadNonStrict(m, path)
			if err != nil || len(res.Unexpected) != tt.extra {
				t.Errorf("LoadNonStrict = %d unexpected keys, %v; want %d", len(res.Unexpected), err, tt.extra)
			}
		})
	}
}

// TestLoadBesideNewerDTypes loads a file that also holds tensors of
// dtypes no vram dtype reads (complex, the 8- and 4-bit floats of
// quantized models): LoadNonStrict reports them as unexpected, and Load
// into a model that has one refuses that key with vram.ErrDType.
func TestLoadBesideNewerDTypes(t *testing.T) {
	lin := nn.NewLinear(2, 1)
	defer nn.Release(lin)
	path := filepath.Join(t.TempDir(), "mixed.safetensors")
	file := map[string]safetensors.Tensor{
		"weight":     {DType: "F32", Shape: []int{1, 2}, Data: make([]byte, 8)},
		"bias":       {DType: "F32", Shape: []int{1}, Data: make([]byte, 4)},
		"freqs":      {DType: "C64", Shape: []int{2}, Data: make([]byte, 16)},
		"scale":      {DType: "F8_E8M0", Shape: []int{3}, Data: []byte{127, 127, 127}},
		"packed_fp4": {DType: "F4", Shape: []int{4}, Data: []byte{0x22, 0x22}},
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, file, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := nn.LoadNonStrict(lin, path)
	if err != nil || !slices.Equal(res.Unexpected, []string{"freqs", "packed_fp4", "scale"}) {
		t.Fatalf("LoadNonStrict = %+v, %v; want freqs, packed_fp4 and scale unexpected", res, err)
	}
	file["bias"] = safetensors.Tensor{DType: "F8_E8M0", Shape: []int{1}, Data: []byte{127}}
	buf.Reset()
	if err := safetensors.Write(&buf, file, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := nn.LoadNonStrict(lin, path); !errors.Is(err, vram.ErrDType) {
		t.Fatalf("LoadNonStrict of an F8_E8M0 bias = %v, want vram.ErrDType", err)
	}
}

// TestLoadConversionFailsAtomically loads a file whose first tensor
// converts into the model's dtype and whose second does not: the error
// changes nothing, the first tensor included, though tensors are
// converted and copied one at a time.
func TestLoadConversionFailsAtomically(t *testing.T) {
	f32 := func(v float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)) }
	tests := []struct {
		name string
		bad  safetensors.Tensor
		dt   vram.DType
	}{
		{"F32 NaN into int64", safetensors.Tensor{DType: "F32", Data: f32(float32(math.NaN()))}, vram.Int64},
		{"F32 1e10 into int32", safetensors.Tensor{DType: "F32", Data: f32(1e10)}, vram.Int32},
		{"F64 1e300 into int64", safetensors.Tensor{DType: "F64", Data: binary.LittleEndian.AppendUint64(nil, math.Float64bits(1e300))}, vram.Int64},
		{"I64 above int32", safetensors.Tensor{DType: "I64", Data: binary.LittleEndian.AppendUint64(nil, 1<<31)}, vram.Int32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			good := safetensors.Tensor{DType: "F32", Shape: []int{}, Data: f32(3)}
			tt.bad.Shape = []int{}
			path := safetensorsFile(t, map[string]safetensors.Tensor{"a": good, "b": tt.bad})
			m := &stateBag{}
			a := vram.Full(vram.Shape{}, 5, tt.dt)
			m.RegisterBuffer("a", a)
			m.RegisterBuffer("b", vram.Full(vram.Shape{}, 5, tt.dt))
			if err := nn.Load(m, path); !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("Load = %v, want an error matching vram.ErrArgument", err)
			}
			if got := a.Float64s()[0]; got != 5 {
				t.Errorf("a failed Load changed a to %v", got)
			}
		})
	}
}
