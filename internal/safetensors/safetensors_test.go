package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vramgo/vram/internal/fuzztest"
)

// file builds a safetensors file from a raw header and data section.
func file(header string, data []byte) []byte {
	var b bytes.Buffer
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
	b.Write(n[:])
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

func f32bytes(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		tensors  map[string]Tensor
		metadata map[string]string
	}{
		{name: "empty", tensors: map[string]Tensor{}},
		{name: "one f32", tensors: map[string]Tensor{
			"w": {DType: "F32", Shape: []int{2, 2}, Data: f32bytes(1, 2, 3, 4)},
		}},
		{name: "mixed with metadata", tensors: map[string]Tensor{
			"layer.0.weight": {DType: "F64", Shape: []int{1, 2}, Data: make([]byte, 16)},
			"layer.0.bias":   {DType: "BF16", Shape: []int{3}, Data: []byte{1, 2, 3, 4, 5, 6}},
			"ids":            {DType: "I64", Shape: []int{1}, Data: []byte{7, 0, 0, 0, 0, 0, 0, 0}},
			"mask":           {DType: "BOOL", Shape: []int{3}, Data: []byte{1, 0, 1}},
			"half":           {DType: "F16", Shape: []int{}, Data: []byte{0, 0x3c}},
			"i32":            {DType: "I32", Shape: []int{1}, Data: []byte{1, 0, 0, 0}},
		}, metadata: map[string]string{"format": "pt", "quote\"key": "line\nbreak"}},
		{name: "zero-size tensors", tensors: map[string]Tensor{
			"a": {DType: "F32", Shape: []int{0, 3}, Data: []byte{}},
			"b": {DType: "F32", Shape: []int{1}, Data: f32bytes(5)},
			"c": {DType: "F32", Shape: []int{2, 0}, Data: nil},
		}},
		{name: "unicode name", tensors: map[string]Tensor{
			"héllo/世界": {DType: "U8", Shape: []int{2}, Data: []byte{9, 8}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, tt.tensors, tt.metadata); err != nil {
				t.Fatalf("Write: %v", err)
			}
			hlen := binary.LittleEndian.Uint64(buf.Bytes())
			if hlen%8 != 0 {
				t.Errorf("header length %d is not a multiple of 8", hlen)
			}
			got, meta, err := Read(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if len(got) != len(tt.tensors) {
				t.Fatalf("got %d tensors, want %d", len(got), len(tt.tensors))
			}
			for name, want := range tt.tensors {
				g, ok := got[name]
				if !ok {
					t.Fatalf("missing %q", name)
				}
				if g.DType != want.DType || !reflect.DeepEqual(append([]int{}, g.Shape...), append([]int{}, want.Shape...)) ||
					!bytes.Equal(g.Data, want.Data) {
					t.Errorf("%q: got %+v, want %+v", name, g, want)
				}
			}
			if len(tt.metadata) == 0 {
				if meta != nil {
					t.Errorf("metadata = %v, want nil", meta)
				}
			} else if !reflect.DeepEqual(meta, tt.metadata) {
				t.Errorf("metadata = %v, want %v", meta, tt.metadata)
			}
		})
	}
}

func TestWriteLayout(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, map[string]Tensor{
		"b": {DType: "F32", Shape: []int{1}, Data: f32bytes(2)},
		"a": {DType: "F32", Shape: []int{2}, Data: f32bytes(0, 1)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	n := binary.LittleEndian.Uint64(b)
	hdr := string(b[8 : 8+n])
	want := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`
	if strings.TrimRight(hdr, " ") != want {
		t.Errorf("header = %q, want %q", hdr, want)
	}
	if !bytes.Equal(b[8+n:], f32bytes(0, 1, 2)) {
		t.Errorf("data section = %v", b[8+n:])
	}
}

// TestWriteAligns checks that every tensor Write lays out starts at a
// multiple of its element size, in the data section and in the file, as
// the reference writer lays them out: readers that view the file's bytes
// as the tensor's type (a memory map, torch's view of bytes as float) fail
// on a float32 that follows three bytes of bool.
func TestWriteAligns(t *testing.T) {
	tests := []struct {
		name    string
		tensors map[string]Tensor
	}{
		{"bool before float32", map[string]Tensor{
			"a": {DType: "BOOL", Shape: []int{3}, Data: []byte{1, 0, 1}},
			"b": {DType: "F32", Shape: []int{1}, Data: f32bytes(2)},
		}},
		{"every size, odd counts", map[string]Tensor{
			"a": {DType: "I8", Shape: []int{1}, Data: []byte{7}},
			"b": {DType: "BF16", Shape: []int{3}, Data: make([]byte, 6)},
			"c": {DType: "F32", Shape: []int{3}, Data: f32bytes(1, 2, 3)},
			"d": {DType: "I64", Shape: []int{1}, Data: make([]byte, 8)},
			"e": {DType: "U8", Shape: []int{5}, Data: []byte{1, 2, 3, 4, 5}},
			"f": {DType: "F16", Shape: []int{}, Data: []byte{0, 0x3c}},
			"g": {DType: "F64", Shape: []int{0}, Data: nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, tt.tensors, map[string]string{"format": "pt"}); err != nil {
				t.Fatal(err)
			}
			b := buf.Bytes()
			start := 8 + int64(binary.LittleEndian.Uint64(b))
			entries, _, err := parseHeader(b[8:start])
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				bits, _ := DTypeBits(e.dtype)
				if size := int64(max(bits/8, 1)); e.begin%size != 0 || (start+e.begin)%size != 0 {
					t.Errorf("%s tensor %q starts at byte %d of the data section, %d of the file", e.dtype, e.name, e.begin, start+e.begin)
				}
			}
			got, _, err := Read(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tt.tensors {
				if g := got[name]; g.DType != want.DType || !reflect.DeepEqual(g.Shape, want.Shape) || !bytes.Equal(g.Data, want.Data) {
					t.Errorf("%q read back as %+v, want %+v", name, g, want)
				}
			}
		})
	}
}

func TestWriteErrors(t *testing.T) {
	tests := []struct {
		name    string
		tensors map[string]Tensor
		want    string
	}{
		{"unknown dtype", map[string]Tensor{"x": {DType: "F128", Shape: []int{1}, Data: make([]byte, 16)}}, "unknown dtype"},
		{"short data", map[string]Tensor{"x": {DType: "F32", Shape: []int{2}, Data: make([]byte, 4)}}, "needs 8 bytes"},
		{"negative dim", map[string]Tensor{"x": {DType: "F32", Shape: []int{-1}}}, "negative dimension"},
		{"empty name", map[string]Tensor{"": {DType: "F32", Shape: []int{0}}}, "empty tensor name"},
		{"reserved name", map[string]Tensor{"__metadata__": {DType: "F32", Shape: []int{0}}}, "reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tt.tensors, nil)
			if err == nil || !strings.HasPrefix(err.Error(), "safetensors: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes before failing", buf.Len())
			}
		})
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteIOError(t *testing.T) {
	err := Write(failWriter{}, map[string]Tensor{"x": {DType: "F32", Shape: []int{1}, Data: f32bytes(1)}}, nil)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err = %v", err)
	}
}

func TestReadErrors(t *testing.T) {
	huge := make([]byte, 8)
	binary.LittleEndian.PutUint64(huge, MaxHeaderSize+1)
	hugeU := make([]byte, 8)
	binary.LittleEndian.PutUint64(hugeU, math.MaxUint64)
	tests := []struct {
		name  string
		input []byte
		want  string
	}{
		{"empty input", nil, "truncated"},
		{"short length", []byte{1, 2, 3}, "truncated"},
		{"header too large", huge, "exceeds the limit"},
		{"header length max uint64", hugeU, "exceeds the limit"},
		{"header too small", file("{", nil), "too small"},
		{"truncated header", file(`{"a":1}`, nil)[:10], "truncated"},
		{"not JSON", file("not json", nil), "not valid JSON"},
		{"not an object", file(`[1, 2, 3]`, nil), "not a JSON object"},
		{"invalid UTF-8", file("{\"\xff\":1}", nil), "UTF-8"},
		{"trailing garbage in header", file(`{}x`, nil), "after the JSON header"},
		{"two objects", file(`{} {}`, nil), "after the JSON header"},
		{"unterminated object", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}`, f32bytes(1)), "not valid JSON"},
		{"entry not an object", file(`{"a":5}`, nil), "bad header entry"},
		{"unknown field", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, f32bytes(1)), "unknown field"},
		{"missing dtype", file(`{"a":{"shape":[1],"data_offsets":[0,4]}}`, f32bytes(1)), "missing dtype"},
		{"missing shape", file(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, f32bytes(1)), "missing shape"},
		{"null shape", file(`{"a":{"dtype":"F32","shape":null,"data_offsets":[0,4]}}`, f32bytes(1)), "missing shape"},
		{"missing offsets", file(`{"a":{"dtype":"F32","shape":[1]}}`, f32bytes(1)), "missing data_offsets"},
		{"unknown dtype", file(`{"a":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}}`, f32bytes(1)), "unknown dtype"},
		{"negative dim", file(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, f32bytes(1)), "negative dimension"},
		{"fractional dim", file(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`, f32bytes(1)), "bad header entry"},
		{"shape overflow", file(`{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, make([]byte, 8)), "too large"},
		{"three offsets", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, f32bytes(1)), "2 numbers"},
		{"reversed offsets", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}`, f32bytes(1)), "invalid data_offsets"},
		{"negative offset", file(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[-4,-4]}}`, nil), "invalid data_offsets"},
		{"size mismatch", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, f32bytes(1)), "needs 8"},
		{"overlap", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32bytes(1, 2)), "overlaps"},
		{"gap at start", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32bytes(1, 2)), "gap"},
		{"gap between", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, f32bytes(1, 2, 3)), "gap"},
		{"data beyond end", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32bytes(1)), "truncated"},
		{"huge claimed data", file(`{"a":{"dtype":"U8","shape":[1099511627776],"data_offsets":[0,1099511627776]}}`, f32bytes(1)), "truncated"},
		{"trailing data", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32bytes(1, 2)), "trailing bytes"},
		{"duplicate name", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32bytes(1, 2)), "duplicate key"},
		{"empty name", file(`{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32bytes(1)), "empty tensor name"},
		{"metadata not strings", file(`{"__metadata__":{"a":1}}`, nil), "object of strings"},
		{"metadata null", file(`{"__metadata__":null}`, nil), "object of strings"},
		{"metadata array", file(`{"__metadata__":["a"]}`, nil), "object of strings"},
		// encoding/json lets the last of a repeated member win and matches
		// member names in any case; the format's reference reader refuses
		// both, and so must Read, or two readers see different tensors.
		{"repeated dtype", file(`{"a":{"dtype":"F32","dtype":"I32","shape":[1],"data_offsets":[0,4]}}`, f32bytes(1)), `duplicate key "dtype"`},
		{"repeated shape", file(`{"a":{"dtype":"F32","shape":[2],"shape":[1],"data_offsets":[0,4]}}`, f32bytes(1)), `duplicate key "shape"`},
		{"repeated offsets", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8],"data_offsets":[0,4]}}`, f32bytes(1)), `duplicate key "data_offsets"`},
		{"dtype in capitals", file(`{"a":{"DType":"F32","shape":[1],"data_offsets":[0,4]}}`, f32bytes(1)), `unknown field "DType"`},
		{"offsets in capitals", file(`{"a":{"dtype":"F32","shape":[1],"DATA_OFFSETS":[0,4]}}`, f32bytes(1)), `unknown field "DATA_OFFSETS"`},
		{"null offsets", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":null}}`, f32bytes(1)), "missing data_offsets"},
		{"repeated metadata key", file(`{"__metadata__":{"k":"v","k":"w"}}`, nil), `duplicate key "k"`},
		{"metadata null value", file(`{"__metadata__":{"k":null}}`, nil), "object of strings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, meta, err := Read(bytes.NewReader(tt.input))
			if err == nil {
				t.Fatalf("Read succeeded with %v %v, want an error containing %q", got, meta, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "safetensors: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %q, want one prefixed \"safetensors: \" containing %q", err, tt.want)
			}
		})
	}
}

// TestReadMemory reads headers of many small records and of long names,
// strings and shapes, and checks that the memory Read allocates, garbage
// included, stays within a small multiple of the input: the header may be
// 100 MiB, and reading one of 90 MiB of records allocated 5 GB.
func TestReadMemory(t *testing.T) {
	// members returns a header object of members made by format from
	// 0, 1, 2, ... up to 2 MiB, in the object around.
	members := func(around, format string) []byte {
		var h strings.Builder
		for i := 0; h.Len() < 2<<20; i++ {
			if i > 0 {
				h.WriteByte(',')
			}
			fmt.Fprintf(&h, format, i)
		}
		return file(fmt.Sprintf(around, h.String()), nil)
	}
	long := strings.Repeat("x", 1<<20)
	tests := []struct {
		name  string
		input []byte
	}{
		{"many records", members("{%s}", `"%x":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}`)},
		{"many dimensions", members("{%s}", `"%x":{"dtype":"U8","shape":[0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"data_offsets":[0,0]}`)},
		{"many metadata keys", members(`{"__metadata__":{%s}}`, `"%x":"v"`)},
		{"long strings", file(`{"__metadata__":{"`+long+`":"`+long+`","k":"\u00e9`+long+`"},"`+long+`":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, _, err := Read(bytes.NewReader(tt.input))
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if got, limit := after.TotalAlloc-before.TotalAlloc, 32*uint64(len(tt.input)); got > limit {
				t.Errorf("reading %d bytes allocated %d, above %d", len(tt.input), got, limit)
			}
		})
	}
}

// TestReadErrorsAreShort reads headers whose names, dtypes or shapes
// are megabytes long: the errors quote them cut short.
func TestReadErrorsAreShort(t *testing.T) {
	long := strings.Repeat("\u00e9", 1<<19) // 1 MiB of UTF-8
	dims := "[0" + strings.Repeat(",1", 1<<19) + "]"
	tests := []struct {
		name, header, want string
	}{
		{"duplicate long name", `{"` + long + `":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"` + long + `":{}}`, "duplicate key"},
		{"long unknown dtype", `{"a":{"dtype":"` + long + `","shape":[0],"data_offsets":[0,0]}}`, "unknown dtype"},
		{"long name, missing shape", `{"` + long + `":{"dtype":"U8","data_offsets":[0,0]}}`, "missing shape"},
		{"long shape, wrong size", `{"a":{"dtype":"U8","shape":` + dims + `,"data_offsets":[0,1]}}`, "needs 0"},
		{"long metadata key", `{"__metadata__":{"` + long + `":1}}`, "not a string"},
		{"long names overlapping", `{"` + long + `":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b` + long + `":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, "overlaps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Read(bytes.NewReader(file(tt.header, []byte{0})))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %.200v, want one about %q", err, tt.want)
			}
			if len(err.Error()) > 2000 || !utf8.ValidString(err.Error()) {
				t.Errorf("error of %d bytes: %.300s", len(err.Error()), err)
			}
		})
	}
}

func TestReadAcceptsUnsortedAndPadded(t *testing.T) {
	// Offsets need not follow name order, and the padding may be any JSON
	// whitespace.
	hdr := `{"z":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[],"data_offsets":[4,8]},"__metadata__":{"k":"v"}}` + " \n\t "
	got, meta, err := Read(bytes.NewReader(file(hdr, f32bytes(1, 2))))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got["z"].Data, f32bytes(1)) || !bytes.Equal(got["a"].Data, f32bytes(2)) || len(got["a"].Shape) != 0 {
		t.Errorf("got %+v", got)
	}
	if meta["k"] != "v" {
		t.Errorf("metadata = %v", meta)
	}
	// Appending to one tensor's data must not clobber the next one's.
	z := got["z"]
	_ = append(z.Data, 0xff)
	if !bytes.Equal(got["a"].Data, f32bytes(2)) {
		t.Error("append to one tensor's Data overwrote another's")
	}
}

func TestDTypeBits(t *testing.T) {
	for name, want := range map[string]int{"F32": 32, "F64": 64, "F16": 16, "BF16": 16, "I32": 32, "I64": 64, "BOOL": 8,
		"C64": 64, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6} {
		if got, ok := DTypeBits(name); !ok || got != want {
			t.Errorf("DTypeBits(%q) = %d, %v; want %d, true", name, got, ok, want)
		}
	}
	if _, ok := DTypeBits("float32"); ok {
		t.Error(`DTypeBits("float32") is ok`)
	}
}

// TestReadNewerDTypes reads tensors of the dtypes the format gained for
// complex numbers and for the 8-, 6- and 4-bit floats of quantized models,
// which Read refused, and with them the whole file: their sizes count
// bits, and a tensor must fill whole bytes.
func TestReadNewerDTypes(t *testing.T) {
	tests := []struct {
		dtype string
		shape string
		size  int
		want  string // "" for success
	}{
		{"C64", "[2]", 16, ""},
		{"F8_E8M0", "[3]", 3, ""},
		{"F8_E4M3FNUZ", "[4]", 4, ""},
		{"F8_E5M2FNUZ", "[1]", 1, ""},
		{"F4", "[2,3]", 3, ""},
		{"F6_E2M3", "[4]", 3, ""},
		{"F6_E3M2", "[0]", 0, ""},
		{"F4", "[3]", 2, "whole number of bytes"},
		{"F6_E3M2", "[2]", 2, "whole number of bytes"},
		{"F4", "[4611686018427387904]", 0, "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.dtype+tt.shape, func(t *testing.T) {
			hdr := fmt.Sprintf(`{"q":{"dtype":%q,"shape":%s,"data_offsets":[0,%d]},"w":{"dtype":"F32","shape":[1],"data_offsets":[%d,%d]}}`,
				tt.dtype, tt.shape, tt.size, tt.size, tt.size+4)
			got, _, err := Read(bytes.NewReader(file(hdr, append(make([]byte, tt.size), f32bytes(1)...))))
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want one about %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if q := got["q"]; q.DType != tt.dtype || len(q.Data) != tt.size || !bytes.Equal(got["w"].Data, f32bytes(1)) {
				t.Errorf("read %+v and %+v", q, got["w"])
			}
		})
	}
}

// maxFuzzFile bounds the files FuzzRead reads: room for a header with a
// few tensors and their data.
const maxFuzzFile = 4 << 10

// FuzzRead checks that Read refuses a bad file with a prefixed error and
// without allocating the sizes its header claims, and that whatever it
// accepts is consistent (each tensor's data is its dtype and shape's size)
// and writes back and reads the same. Seeds are in testdata/fuzz/FuzzRead.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	_ = Write(&buf, map[string]Tensor{
		"a": {DType: "F32", Shape: []int{2}, Data: f32bytes(1, 2)},
		"b": {DType: "I64", Shape: []int{}, Data: make([]byte, 8)},
	}, map[string]string{"format": "pt"})
	f.Add(buf.Bytes())
	f.Add(file(`{}`, nil))
	f.Add(file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32bytes(1, 2)))
	f.Add(file(`{"a":{"dtype":"U8","shape":[1099511627776],"data_offsets":[0,1099511627776]}}`, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > maxFuzzFile {
			return
		}
		before := fuzztest.HeapAllocated()
		tensors, meta, err := Read(bytes.NewReader(in))
		// Read may size its header buffer by the claimed length, up to 1 MiB.
		fuzztest.CheckAllocated(t, "Read", len(in), before, 4<<20, 256)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "safetensors: ") || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("error %q: want one line starting with safetensors: ", msg)
			}
			return
		}
		for name, x := range tensors {
			n, err := byteSize(name, x.DType, x.Shape)
			if err != nil || int64(len(x.Data)) != n {
				t.Fatalf("tensor %q: %d data bytes for %s%v (%d, %v)", name, len(x.Data), x.DType, x.Shape, n, err)
			}
		}
		// Whatever Read accepts, Write must write back and Read must
		// return unchanged.
		var out bytes.Buffer
		if err := Write(&out, tensors, meta); err != nil {
			t.Fatalf("Write of what Read returned: %v", err)
		}
		again, meta2, err := Read(&out)
		if err != nil {
			t.Fatalf("Read of what Write wrote: %v", err)
		}
		if len(meta) == 0 && len(meta2) == 0 {
			meta, meta2 = nil, nil
		}
		if len(again) != len(tensors) || !reflect.DeepEqual(meta, meta2) {
			t.Fatalf("round trip changed the contents")
		}
		for name, x := range tensors {
			y := again[name]
			if x.DType != y.DType || !bytes.Equal(x.Data, y.Data) || len(x.Shape) != len(y.Shape) || len(x.Shape) > 0 && !reflect.DeepEqual(x.Shape, y.Shape) {
				t.Fatalf("round trip changed %q", name)
			}
		}
	})
}

// TestFuzzSeeds checks the committed seed corpus of FuzzRead (run with
// -update-fuzz-seeds to rewrite it): small files of every dtype, with
// metadata, padding, unsorted entries, and hostile headers.
func TestFuzzSeeds(t *testing.T) {
	var seeds []fuzztest.Seed
	add := func(name string, b []byte) { seeds = append(seeds, fuzztest.Seed{Name: name, Args: []any{b}}) }
	var buf bytes.Buffer
	if err := Write(&buf, map[string]Tensor{
		"weight": {DType: "BF16", Shape: []int{2, 2}, Data: make([]byte, 8)},
		"bias":   {DType: "F16", Shape: []int{2}, Data: []byte{0, 0x3c, 0, 0xbc}},
		"step":   {DType: "I64", Shape: []int{}, Data: make([]byte, 8)},
		"mask":   {DType: "BOOL", Shape: []int{3}, Data: []byte{1, 0, 1}},
		"empty":  {DType: "F64", Shape: []int{0, 4}, Data: nil},
	}, map[string]string{"format": "pt", "note": "ü"}); err != nil {
		t.Fatal(err)
	}
	add("model", buf.Bytes())
	add("unsorted-padded", file(`{"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}      `, []byte{7, 9}))
	add("claims-1TiB", file(`{"a":{"dtype":"U8","shape":[1099511627776],"data_offsets":[0,1099511627776]}}`, nil))
	add("claims-huge-header", []byte{0, 0, 0, 0, 0, 0, 0, 0x40, '{'})
	add("overflowing-shape", file(`{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, nil))
	add("overlap", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32bytes(1, 2)))
	add("metadata-not-string", file(`{"__metadata__":{"a":1}}`, nil))
	add("truncated", buf.Bytes()[:buf.Len()-3])
	fuzztest.Check(t, "FuzzRead", seeds, maxFuzzFile)
}
