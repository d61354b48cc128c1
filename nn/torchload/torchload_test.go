package torchload

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/half"
)

func read(t *testing.T, file []byte, opts Options) (StateDict, error) {
	t.Helper()
	return ReadStateDict(bytes.NewReader(file), int64(len(file)), opts)
}

func mustRead(t *testing.T, file []byte, opts Options) StateDict {
	t.Helper()
	sd, err := read(t, file, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sd.Release)
	return sd
}

func TestReadDTypes(t *testing.T) {
	f16 := make([]uint16, 3)
	bf16 := make([]uint16, 3)
	for i, v := range []float32{1.5, -2, 65504} {
		f16[i] = half.F16(v)
		bf16[i] = half.BF16(v)
	}
	tests := []struct {
		class string
		data  []byte
		n     int64
		dtype vram.DType
		file  string
		want  []float64
	}{
		{"FloatStorage", le([]float32{1.5, -2, 3e38}), 3, vram.Float32, "float32", []float64{1.5, -2, float64(float32(3e38))}},
		{"DoubleStorage", le([]float64{1.5, -2, 1e300}), 3, vram.Float64, "float64", []float64{1.5, -2, 1e300}},
		{"HalfStorage", le(f16), 3, vram.Float16, "float16", []float64{1.5, -2, 65504}},
		{"BFloat16Storage", le(bf16), 3, vram.BFloat16, "bfloat16", []float64{1.5, -2, float64(half.BF16To32(bf16[2]))}},
		{"LongStorage", le([]int64{1, -2, 1 << 40}), 3, vram.Int64, "int64", []float64{1, -2, 1 << 40}},
		{"IntStorage", le([]int32{1, -2, math.MaxInt32}), 3, vram.Int32, "int32", []float64{1, -2, math.MaxInt32}},
		{"ShortStorage", le([]int16{1, -2, math.MinInt16}), 3, vram.Int32, "int16", []float64{1, -2, math.MinInt16}},
		{"CharStorage", le([]int8{1, -2, -128}), 3, vram.Int8, "int8", []float64{1, -2, -128}},
		{"ByteStorage", []byte{1, 200, 255}, 3, vram.Int32, "uint8", []float64{1, 200, 255}},
		{"BoolStorage", []byte{1, 0, 7}, 3, vram.Bool, "bool", []float64{1, 0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			root := odict{{"w", tens{key: "0", class: tt.class, numel: tt.n, size: []int64{3}, stride: []int64{1}}}}
			sd := mustRead(t, archiveOf(t, root, map[string][]byte{"0": tt.data}), Options{})
			if len(sd) != 1 || sd[0].Key != "w" || sd[0].DType != tt.file {
				t.Fatalf("got %+v", sd)
			}
			got := sd[0].Tensor
			if got.DType() != tt.dtype || !slices.Equal([]int(got.Shape()), []int{3}) {
				t.Fatalf("dtype %s shape %v, want %s [3]", got.DType(), got.Shape(), tt.dtype)
			}
			if v := got.Float64s(); !slices.Equal(v, tt.want) {
				t.Errorf("values %v, want %v", v, tt.want)
			}
		})
	}
}

func TestReadViews(t *testing.T) {
	store := map[string][]byte{"0": le(seq(12)), "1": le([]float32{7})}
	tests := []struct {
		name  string
		ten   tens
		shape []int
		want  []float64
	}{
		{"contiguous", f32("0", 3, 4), []int{3, 4}, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
		{"transposed", tens{key: "0", class: "FloatStorage", numel: 12, size: []int64{4, 3}, stride: []int64{1, 4}},
			[]int{4, 3}, []float64{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}},
		{"offset row", tens{key: "0", class: "FloatStorage", numel: 12, offset: 4, size: []int64{4}, stride: []int64{1}},
			[]int{4}, []float64{4, 5, 6, 7}},
		{"column", tens{key: "0", class: "FloatStorage", numel: 12, offset: 1, size: []int64{3}, stride: []int64{4}},
			[]int{3}, []float64{1, 5, 9}},
		{"expanded", tens{key: "1", class: "FloatStorage", numel: 1, size: []int64{2, 3}, stride: []int64{0, 0}},
			[]int{2, 3}, []float64{7, 7, 7, 7, 7, 7}},
		{"scalar", tens{key: "0", class: "FloatStorage", numel: 12, offset: 11, size: []int64{}, stride: []int64{}},
			[]int{}, []float64{11}},
		{"empty", tens{key: "0", class: "FloatStorage", numel: 12, offset: 100, size: []int64{0, 5}, stride: []int64{5, 1}},
			[]int{0, 5}, []float64{}},
		{"size one dims", tens{key: "0", class: "FloatStorage", numel: 12, offset: 2, size: []int64{1, 2, 1}, stride: []int64{99, 3, 99}},
			[]int{1, 2, 1}, []float64{2, 5}},
		{"untyped v3", tens{key: "u", class: "UntypedStorage", numel: 48, offset: 2, size: []int64{2}, stride: []int64{3}, v3: "float32"},
			[]int{2}, []float64{2, 5}},
		{"parameter", tens{key: "0", class: "FloatStorage", numel: 12, size: []int64{2}, stride: []int64{1}, param: true},
			[]int{2}, []float64{0, 1}},
	}
	store["u"] = store["0"]
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sd := mustRead(t, archiveOf(t, odict{{"x", tt.ten}}, store), Options{})
			got := sd[0].Tensor
			if !slices.Equal([]int(got.Shape()), tt.shape) {
				t.Fatalf("shape %v, want %v", got.Shape(), tt.shape)
			}
			if v := got.Float64s(); !slices.Equal(v, tt.want) {
				t.Errorf("values %v, want %v", v, tt.want)
			}
		})
	}
}

// TestReadSharedStorage reads two views of one storage (a fused qkv
// weight split in three, saved as views): each gets its own values, and
// the storage is read once.
func TestReadSharedStorage(t *testing.T) {
	q := tens{key: "0", class: "FloatStorage", numel: 12, size: []int64{2, 2}, stride: []int64{2, 1}}
	k := q
	k.offset = 4
	v := q
	v.offset = 8
	root := odict{{"q", q}, {"k", k}, {"v", v}, {"q2", q}}
	sd := mustRead(t, archiveOf(t, root, map[string][]byte{"0": le(seq(12))}), Options{})
	want := map[string][]float64{"q": {0, 1, 2, 3}, "k": {4, 5, 6, 7}, "v": {8, 9, 10, 11}, "q2": {0, 1, 2, 3}}
	if !slices.Equal(sd.Keys(), []string{"q", "k", "v", "q2"}) {
		t.Fatalf("keys %v", sd.Keys())
	}
	for _, e := range sd {
		if got := e.Tensor.Float64s(); !slices.Equal(got, want[e.Key]) {
			t.Errorf("%s = %v, want %v", e.Key, got, want[e.Key])
		}
	}
	if sd[0].Tensor == sd[3].Tensor {
		t.Error("a key saved twice shares its tensor")
	}
}

func TestReadBigEndian(t *testing.T) {
	root := odict{{"w", f32("0", 2)}}
	be := []byte{0x3f, 0xc0, 0, 0, 0xc0, 0, 0, 0} // 1.5, -2
	file := zipOf(t, []record{
		{name: "a/data.pkl", data: pickle(root)},
		{name: "a/byteorder", data: []byte("big")},
		{name: "a/data/0", data: be},
	})
	sd := mustRead(t, file, Options{})
	if got := sd[0].Tensor.Float64s(); !slices.Equal(got, []float64{1.5, -2}) {
		t.Errorf("got %v", got)
	}
}

func TestSelectNested(t *testing.T) {
	sdict := odict{{"module.fc.weight", f32("0", 2)}, {"module.fc.bias", f32("1", 1)}}
	plain := odict{{"fc.weight", f32("0", 2)}, {"fc.bias", f32("1", 1)}}
	store := map[string][]byte{"0": le([]float32{1, 2}), "1": le([]float32{3})}
	optim := pdict{{"state", pdict{{int64(0), pdict{{"step", f32("1", 1)}, {"exp_avg", f32("0", 2)}}}}},
		{"param_groups", []any{pdict{{"lr", 0.1}, {"betas", tup{0.9, 0.999}}, {"params", []any{0, 1}}, {"foreach", nil}}}}}
	tests := []struct {
		name string
		root any
		opts Options
		keys []string
	}{
		{"plain", plain, Options{}, []string{"fc.weight", "fc.bias"}},
		{"ddp prefix stripped", sdict, Options{}, []string{"fc.weight", "fc.bias"}},
		{"explicit prefix", plain, Options{StripPrefix: "fc."}, []string{"weight", "bias"}},
		{"model key", pdict{{"epoch", 3}, {"model", plain}, {"optimizer", optim}}, Options{}, []string{"fc.weight", "fc.bias"}},
		{"state_dict key first", pdict{{"model", plain}, {"state_dict", sdict}}, Options{}, []string{"fc.weight", "fc.bias"}},
		{"explicit key", pdict{{"ema", pdict{{"net", plain}}}, {"model", sdict}}, Options{Key: "ema.net"}, []string{"fc.weight", "fc.bias"}},
		{"int key", pdict{{"optimizer", optim}}, Options{Key: "optimizer.state.0"}, []string{"step", "exp_avg"}},
		{"empty", odict{}, Options{}, []string{}},
		{"compiled", odict{{"_orig_mod.fc.weight", f32("0", 2)}}, Options{}, []string{"fc.weight"}},
		{"ddp of compiled", odict{{"module._orig_mod.fc.weight", f32("0", 2)}, {"module._orig_mod.fc.bias", f32("1", 1)}}, Options{}, []string{"fc.weight", "fc.bias"}},
		{"dotted key", pdict{{"model.ema", plain}, {"model", sdict}}, Options{Key: "model.ema"}, []string{"fc.weight", "fc.bias"}},
		{"device, bytes and a set beside", pdict{{"model", plain}, {"device", call{"torch", "device", tup{"cuda", 0}}},
			{"blob", call{"_codecs", "encode", tup{"\u00ff\u0000", "latin1"}}}, {"tags", call{"__builtin__", "set", tup{[]any{"a"}}}}},
			Options{}, []string{"fc.weight", "fc.bias"}},
		{"list index", pdict{{"models", []any{sdict, plain}}}, Options{Key: "models.1"}, []string{"fc.weight", "fc.bias"}},
		{"mixed prefix kept", odict{{"module.a", f32("0", 2)}, {"b", f32("1", 1)}}, Options{}, []string{"module.a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sd := mustRead(t, archiveOf(t, tt.root, store), tt.opts)
			if got := sd.Keys(); !slices.Equal(got, tt.keys) {
				t.Errorf("keys %v, want %v", got, tt.keys)
			}
		})
	}
}

func TestSelectErrors(t *testing.T) {
	store := map[string][]byte{"0": le([]float32{1, 2})}
	tests := []struct {
		name string
		root any
		opts Options
		msg  string
	}{
		{"no state dict", pdict{{"epoch", 3}, {"weights_of_g", odict{{"a", f32("0", 2)}}}}, Options{}, "choose one with Options.Key"},
		{"missing key", pdict{{"model", odict{}}}, Options{Key: "ema"}, `no key "ema" among ['model']`},
		{"index out of range", pdict{{"models", []any{odict{}}}}, Options{Key: "models.1"}, "not an index"},
		{"key into a non-dict", pdict{{"epoch", 3}}, Options{Key: "epoch.x"}, "not a dict"},
		{"non-tensor value", pdict{{"model", odict{{"a", f32("0", 2)}, {"n", 3}}}}, Options{Key: "model"}, `"n" is a int, not a tensor`},
		{"int key", pdict{{int64(1), f32("0", 2)}}, Options{}, "key of type int"},
		{"root is a list", []any{f32("0", 2)}, Options{}, "holds a list"},
		{"prefix collision", odict{{"a.x", f32("0", 2)}, {"x", f32("0", 2)}}, Options{StripPrefix: "a."}, `two keys become "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := read(t, archiveOf(t, tt.root, store), tt.opts)
			if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %v, want ErrArgument with %q", err, tt.msg)
			}
		})
	}
}

func TestReadStateDictFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.pt")
	if err := os.WriteFile(path, archiveOf(t, odict{{"w", f32("0", 2)}}, map[string][]byte{"0": le([]float32{1, 2})}), 0o644); err != nil {
		t.Fatal(err)
	}
	sd, err := ReadStateDictFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Release()
	if got := sd.Map()["w"].Float64s(); !slices.Equal(got, []float64{1, 2}) {
		t.Errorf("got %v", got)
	}
	if _, err := ReadStateDictFile(filepath.Join(dir, "none.pt"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestCalls decodes the calls of the allowlist that build plain values.
func TestCalls(t *testing.T) {
	tests := []struct {
		name string
		v    call
		want any
	}{
		{"device with index", call{"torch", "device", tup{"cuda", 1}}, "cuda:1"},
		{"device by name", call{"torch", "device", tup{"cpu"}}, "cpu"},
		{"bytes", call{"_codecs", "encode", tup{"\u00ff\u0000a", "latin1"}}, []byte{0xff, 0, 'a'}},
		{"torch.Size", call{"torch", "Size", tup{tup{2, 3}}}, tuple{int64(2), int64(3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := unpickle(pickle(tt.v))
			if err != nil {
				t.Fatal(err)
			}
			if repr(got) != repr(tt.want) || typeName(got) != typeName(tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
			if b, ok := tt.want.([]byte); ok && !bytes.Equal(got.([]byte), b) {
				t.Errorf("got %v, want %v", got, b)
			}
		})
	}
	if _, err := unpickle(pickle(call{"_codecs", "encode", tup{"\u0100", "latin1"}})); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("a character above U+00FF: %v", err)
	}
}

// TestReadLegacy reads files of the legacy format (PyTorch before 1.6, or
// _use_new_zipfile_serialization=False): views, dtypes and nesting as in
// the zip format.
func TestReadLegacy(t *testing.T) {
	store := map[string][]byte{"a": le(seq(6)), "b": le([]int64{7, -8})}
	size := map[string]int{"a": 4, "b": 8}
	tests := []struct {
		name string
		root any
		want map[string][]float64
	}{
		{"state dict", odict{{"w", tens{key: "a", class: "FloatStorage", numel: 6, size: []int64{3, 2}, stride: []int64{1, 3}}},
			{"n", tens{key: "b", class: "LongStorage", numel: 2, offset: 1, size: []int64{}, stride: []int64{}}}},
			map[string][]float64{"w": {0, 3, 1, 4, 2, 5}, "n": {-8}}},
		{"nested ddp", pdict{{"epoch", 1}, {"state_dict", odict{{"module.w", tens{key: "a", class: "FloatStorage", numel: 6, offset: 2, size: []int64{2}, stride: []int64{2}, param: true}},
			{"module.n", tens{key: "b", class: "LongStorage", numel: 2, size: []int64{2}, stride: []int64{1}}}}}},
			map[string][]float64{"w": {2, 4}, "n": {7, -8}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sd := mustRead(t, legacyOf(tt.root, store, size), Options{})
			if len(sd) != len(tt.want) {
				t.Fatalf("keys %v", sd.Keys())
			}
			for _, e := range sd {
				if got := e.Tensor.Float64s(); !slices.Equal(got, tt.want[e.Key]) {
					t.Errorf("%s = %v, want %v", e.Key, got, tt.want[e.Key])
				}
			}
		})
	}
}
