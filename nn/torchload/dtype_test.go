package torchload

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestReadBesideNewerDTypes reads a state dict that holds, beside a
// float32 tensor, one of each dtype PyTorch 2 writes (quantized ones with
// torch._utils._rebuild_qtensor): those vram holds are
// read (the unsigned integers widened), the others are entries without a
// tensor whose error names the dtype, and the float32 tensor is read all
// the same.
func TestReadBesideNewerDTypes(t *testing.T) {
	untyped := func(dtype string, data []byte, size ...int64) (tens, []byte) {
		return tens{key: "1", class: "UntypedStorage", numel: int64(len(data)), size: size, stride: contiguous(size), v3: dtype}, data
	}
	typed := func(class string, numel int64, data []byte, size ...int64) (tens, []byte) {
		return tens{key: "1", class: class, numel: numel, size: size, stride: contiguous(size)}, data
	}
	tests := []struct {
		name string
		x    tens
		data []byte
		want []int64 // the values read; nil: not read
	}{
		{name: "float8_e4m3fn"}, {name: "float8_e5m2"}, {name: "float8_e4m3fnuz"}, {name: "float8_e5m2fnuz"},
		{name: "float8_e8m0fnu"}, {name: "complex32"}, {name: "float4_e2m1fn_x2"},
		{name: "complex64"}, {name: "complex128"}, {name: "qint8"}, {name: "quint8"}, {name: "qint32"},
		{name: "bits8"}, {name: "bits16"},
		{name: "uint16", want: []int64{1, 65535}},
		{name: "uint32", want: []int64{1, math.MaxUint32}},
		{name: "uint64", want: []int64{1, math.MaxInt64}},
	}
	classes := map[string]string{"complex64": "ComplexFloatStorage", "complex128": "ComplexDoubleStorage",
		"qint8": "QInt8Storage", "quint8": "QUInt8Storage", "qint32": "QInt32Storage"}
	for i := range tests {
		tt := &tests[i]
		et := dtypes[tt.name]
		data := make([]byte, 2*et.size)
		switch tt.name {
		case "uint16":
			data = le([]uint16{1, 65535})
		case "uint32":
			data = le([]uint32{1, math.MaxUint32})
		case "uint64":
			data = le([]uint64{1, math.MaxInt64})
		}
		if c, ok := classes[tt.name]; ok {
			tt.x, tt.data = typed(c, 2, data, 2)
			if strings.HasPrefix(tt.name, "q") {
				// As torch.save writes a quantized tensor.
				tt.x.quant = tup{glob{"torch", "per_tensor_affine"}, 0.5, 3}
			}
		} else {
			tt.x, tt.data = untyped(tt.name, data, 2)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := archiveOf(t, odict{{"w", f32("0", 2)}, {"x", tt.x}}, map[string][]byte{"0": le([]float32{1, 2}), "1": tt.data})
			sd := mustRead(t, file, Options{})
			if len(sd) != 2 || sd[0].Err != nil || !slices.Equal(sd[0].Tensor.Float64s(), []float64{1, 2}) {
				t.Fatalf("w: %+v", sd)
			}
			x := sd[1]
			if x.Key != "x" || x.DType != tt.name {
				t.Fatalf("x: %+v", x)
			}
			if tt.want == nil {
				if x.Tensor != nil || !errors.Is(x.Err, vram.ErrDType) || !strings.Contains(x.Err.Error(), tt.name) {
					t.Fatalf("x: tensor %v, error %v; want none and vram.ErrDType naming %s", x.Tensor, x.Err, tt.name)
				}
				if got := sd.Unread().Keys(); !slices.Equal(got, []string{"x"}) {
					t.Errorf("Unread = %v", got)
				}
				if _, ok := sd.Map()["x"]; ok {
					t.Error("Map holds x")
				}
				return
			}
			if x.Err != nil {
				t.Fatal(x.Err)
			}
			if got := x.Tensor.Int64s(); !slices.Equal(got, tt.want) {
				t.Errorf("x = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestReadUint64BeyondInt64 reads a uint64 tensor with a value beyond
// int64 as an entry whose error says so, the other tensors read.
func TestReadUint64BeyondInt64(t *testing.T) {
	x := tens{key: "1", class: "UntypedStorage", numel: 8, size: []int64{1}, stride: []int64{1}, v3: "uint64"}
	file := archiveOf(t, odict{{"w", f32("0", 1)}, {"x", x}}, map[string][]byte{"0": le([]float32{1}), "1": le([]uint64{math.MaxUint64})})
	sd := mustRead(t, file, Options{})
	if sd[0].Tensor == nil || sd[1].Tensor != nil || !errors.Is(sd[1].Err, vram.ErrArgument) || !strings.Contains(sd[1].Err.Error(), "18446744073709551615") {
		t.Fatalf("%+v", sd)
	}
}

// TestLoadPyTorchBesideNewerDTypes loads files holding tensors of dtypes
// vram has not into a Linear: non-strict loading reports those the model
// lacks as unexpected and loads the others, strict loading names their
// dtype, and a key of the model of such a dtype is refused with
// vram.ErrDType, even non-strict, changing nothing.
func TestLoadPyTorchBesideNewerDTypes(t *testing.T) {
	f8 := func(n int64) tens {
		return tens{key: "2", class: "UntypedStorage", numel: n, size: []int64{n}, stride: []int64{1}, v3: "float8_e4m3fn"}
	}
	weight, bias := f32("0", 1, 2), f32("1", 1)
	store := map[string][]byte{"0": le([]float32{3, 4}), "1": le([]float32{5}), "2": {0x38, 0x38}}
	tests := []struct {
		name       string
		root       odict
		strict     bool
		kind       error
		msg        string
		unexpected []string
		want       []float64 // the weight after loading
	}{
		{name: "non-strict", root: odict{{"weight", weight}, {"bias", bias}, {"scale", f8(2)}},
			unexpected: []string{"scale"}, want: []float64{3, 4}},
		{name: "strict", root: odict{{"weight", weight}, {"bias", bias}, {"scale", f8(2)}}, strict: true,
			kind: vram.ErrArgument, msg: `"scale" is of dtype float8_e4m3fn`, unexpected: []string{"scale"}, want: []float64{0, 0}},
		{name: "used", root: odict{{"weight", weight}, {"bias", f8(1)}},
			kind: vram.ErrDType, msg: "float8_e4m3fn", want: []float64{0, 0}},
		{name: "uint16 bias", root: odict{{"weight", weight},
			{"bias", tens{key: "3", class: "UntypedStorage", numel: 2, size: []int64{1}, stride: []int64{1}, v3: "uint16"}}},
			strict: true, want: []float64{3, 4}},
	}
	store["3"] = le([]uint16{7})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string][]byte{}
			for _, e := range tt.root {
				k := e.v.(tens).key
				files[k] = store[k]
			}
			path := filepath.Join(t.TempDir(), "m.pt")
			if err := os.WriteFile(path, archiveOf(t, tt.root, files), 0o644); err != nil {
				t.Fatal(err)
			}
			lin := nn.NewLinear(2, 1)
			defer nn.Release(lin)
			vram.NoGrad(func() { lin.Weight.FillInPlace(0) })
			res, err := LoadPyTorch(lin, path, tt.strict)
			if tt.kind != nil {
				if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("error %v, want %v with %q", err, tt.kind, tt.msg)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Unexpected, tt.unexpected) {
				t.Errorf("unexpected %v, want %v", res.Unexpected, tt.unexpected)
			}
			if got := lin.Weight.Float64s(); !slices.Equal(got, tt.want) {
				t.Errorf("weight %v, want %v", got, tt.want)
			}
		})
	}
}
