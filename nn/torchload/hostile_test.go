package torchload

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
)

// raw wraps opcodes in a pickle of protocol 2 ending with STOP.
func raw(ops ...[]byte) []byte {
	out := []byte{opProto, 2}
	for _, o := range ops {
		out = append(out, o...)
	}
	return append(out, opStop)
}

func globalOp(module, name string) []byte { return []byte("c" + module + "\n" + name + "\n") }

// withPickle is a torch.save archive with the given data.pkl and one
// float32 storage "0" of two elements.
func withPickle(t testing.TB, pkl []byte) []byte {
	return zipOf(t, []record{{name: "archive/data.pkl", data: pkl}, {name: "archive/data/0", data: le([]float32{1, 2})}})
}

// lyingZip is a zip of one deflated data.pkl whose header claims size
// bytes.
func lyingZip(t *testing.T, method uint16, size uint64) []byte {
	var comp bytes.Buffer
	fw, _ := flate.NewWriter(&comp, flate.BestCompression)
	content := pickle(odict{})
	fw.Write(content)
	fw.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	data := comp.Bytes()
	if method == zip.Store {
		data = content
	}
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "archive/data.pkl", Method: method,
		CompressedSize64: uint64(len(data)), UncompressedSize64: size, CRC32: crc32.ChecksumIEEE(content)})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	zw.Close()
	return buf.Bytes()
}

func TestHostileFiles(t *testing.T) {
	ok := archiveOf(t, odict{{"w", f32("0", 2)}}, map[string][]byte{"0": le([]float32{1, 2})})
	deep := []byte{}
	for range 5000 {
		deep = append(deep, opMark)
	}
	zeros := make([]byte, 8<<20)
	longKey := strings.Repeat("k", 1<<20)
	tests := []struct {
		name   string
		file   []byte
		opts   Options
		kind   error
		msg    string
		global string // the name a *GlobalError must carry
	}{
		{name: "os.system", file: withPickle(t, raw(globalOp("os", "system"), []byte("X\x02\x00\x00\x00ls\x85R"))), global: "os.system"},
		{name: "posix.system by STACK_GLOBAL", file: withPickle(t, []byte("\x80\x04\x8c\x05posix\x8c\x06system\x93\x8c\x02ls\x85R.")), global: "posix.system"},
		{name: "builtins.eval", file: withPickle(t, raw(globalOp("__builtin__", "eval"))), global: "builtins.eval"},
		{name: "a model class", file: withPickle(t, raw(globalOp("__main__", "Net"), []byte(")\x81"))), global: "__main__.Net"},
		{name: "torch.load itself", file: withPickle(t, raw(globalOp("torch", "load"))), global: "torch.load"},
		{name: "control characters in a global", file: withPickle(t, raw(globalOp("os\x1b[2J", "system"))), global: "os?[2J.system"},
		{name: "INST", file: withPickle(t, raw([]byte("(ios\nsystem\n"))), kind: vram.ErrArgument, msg: "INST"},
		{name: "OBJ", file: withPickle(t, raw([]byte("(o"))), kind: vram.ErrArgument, msg: "OBJ"},
		{name: "REDUCE of a string", file: withPickle(t, raw([]byte("X\x01\x00\x00\x00a)R"))), kind: vram.ErrArgument, msg: "call of a str"},
		{name: "BUILD of a list", file: withPickle(t, raw([]byte("]}b"))), kind: vram.ErrArgument, msg: "BUILD of a list"},
		{name: "view beyond storage", file: archiveOf(t, odict{{"w", tens{key: "0", class: "FloatStorage", numel: 2, size: []int64{4}, stride: []int64{1}}}}, nil), kind: vram.ErrArgument, msg: "needs 16 bytes"},
		{name: "offset beyond storage", file: archiveOf(t, odict{{"w", tens{key: "0", class: "FloatStorage", numel: 2, offset: 2, size: []int64{1}, stride: []int64{1}}}}, nil), kind: vram.ErrArgument, msg: "needs 12 bytes"},
		{name: "record smaller than storage", file: archiveOf(t, odict{{"w", f32("0", 4)}}, map[string][]byte{"0": le([]float32{1})}), kind: vram.ErrArgument, msg: "record has 4 bytes"},
		{name: "missing record", file: archiveOf(t, odict{{"w", f32("0", 2)}}, nil), kind: vram.ErrArgument, msg: "no data/0 record"},
		{name: "negative size", file: archiveOf(t, odict{{"w", tens{key: "0", class: "FloatStorage", numel: 2, size: []int64{-1}, stride: []int64{1}}}}, nil), kind: vram.ErrArgument, msg: "size (-1)"},
		{name: "negative stride", file: archiveOf(t, odict{{"w", tens{key: "0", class: "FloatStorage", numel: 2, offset: 1, size: []int64{2}, stride: []int64{-1}}}}, nil), kind: vram.ErrArgument, msg: "stride (-1)"},
		{name: "negative offset", file: archiveOf(t, odict{{"w", tens{key: "0", class: "FloatStorage", numel: 2, offset: -1, size: []int64{1}, stride: []int64{1}}}}, nil), kind: vram.ErrArgument, msg: "storage offset -1"},
		{name: "negative numel", file: archiveOf(t, odict{{"w", tens{key: "0", class: "FloatStorage", numel: -2, size: []int64{1}, stride: []int64{1}}}}, nil), kind: vram.ErrArgument, msg: "storage size -2"},
		{name: "huge numel", file: archiveOf(t, odict{{"w", tens{key: "0", class: "FloatStorage", numel: 1 << 60, size: []int64{1}, stride: []int64{1}}}}, nil), kind: vram.ErrArgument, msg: "elements"},
		{name: "size product overflows", file: archiveOf(t, odict{{"w", tens{key: "0", class: "FloatStorage", numel: 2, size: []int64{1 << 40, 1 << 40}, stride: []int64{0, 0}}}}, nil), kind: vram.ErrArgument, msg: "too large"},
		{name: "expanded beyond MaxBytes", file: archiveOf(t, odict{{"w", tens{key: "0", class: "FloatStorage", numel: 2, size: []int64{1 << 20, 1 << 20}, stride: []int64{0, 0}}}}, map[string][]byte{"0": le([]float32{1, 2})}), kind: vram.ErrArgument, msg: "Options.MaxBytes"},
		{name: "no elements, huge sizes", file: archiveOf(t, odict{{"w", tens{key: "0", class: "FloatStorage", numel: 0, size: []int64{1 << 40, 0, 1 << 40}, stride: []int64{0, 0, 0}}}}, nil), kind: vram.ErrArgument, msg: "too large"},
		{name: "too many dims", file: archiveOf(t, odict{{"w", tens{key: "0", class: "FloatStorage", numel: 2, size: make([]int64, 65), stride: make([]int64, 65)}}}, nil), kind: vram.ErrArgument, msg: "65 dimensions"},
		{name: "storage declared twice", file: archiveOf(t, odict{{"a", f32("0", 2)}, {"b", f32("0", 1)}}, nil), kind: vram.ErrArgument, msg: "declared as"},
		{name: "storage key with a slash", file: archiveOf(t, odict{{"w", f32("../x", 1)}}, nil), kind: vram.ErrArgument, msg: "storage key"},
		{name: "deep nesting", file: withPickle(t, raw(deep)), kind: vram.ErrArgument, msg: "nested MARKs"},
		{name: "huge memo index", file: withPickle(t, raw([]byte("Nr\xff\xff\xff\xff"))), kind: vram.ErrArgument, msg: "memo index"},
		{name: "memo get before put", file: withPickle(t, raw([]byte("h\x05"))), kind: vram.ErrArgument, msg: "memo entry 5"},
		{name: "huge string length", file: withPickle(t, raw([]byte("\x8d\xff\xff\xff\xff\xff\xff\xff\x7f"))), kind: vram.ErrArgument, msg: "bytes left"},
		{name: "negative LONG4", file: withPickle(t, raw([]byte("\x8b\xff\xff\xff\xff"))), kind: vram.ErrArgument, msg: "truncated"},
		{name: "truncated pickle", file: withPickle(t, pickle(odict{{"w", f32("0", 2)}})[:40]), kind: vram.ErrArgument, msg: "truncated"},
		{name: "no STOP", file: withPickle(t, []byte{opProto, 2, opNone}), kind: vram.ErrArgument, msg: "truncated"},
		{name: "two values at STOP", file: withPickle(t, raw([]byte("NN"))), kind: vram.ErrArgument, msg: "2 values"},
		{name: "protocol 0", file: withPickle(t, []byte("I1\n.")), kind: vram.ErrArgument, msg: "INT"},
		{name: "unknown opcode", file: withPickle(t, raw([]byte{0xff})), kind: vram.ErrArgument, msg: "unknown opcode 0xff"},
		{name: "truncated file", file: ok[:len(ok)/2], kind: vram.ErrArgument, msg: "zip"},
		{name: "empty file", file: nil, kind: vram.ErrArgument, msg: "no zip header"},
		{name: "legacy format", file: []byte("\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03."), kind: vram.ErrArgument, msg: "ends early"},
		{name: "legacy without magic", file: []byte("\x80\x02K\x01."), kind: vram.ErrArgument, msg: "magic number"},
		{name: "legacy storage cut", file: func() []byte {
			f := legacyOf(odict{{"w", f32("0", 2)}}, map[string][]byte{"0": le([]float32{1, 2})}, map[string]int{"0": 4})
			return f[:len(f)-1]
		}(), kind: vram.ErrArgument, msg: "beyond the end"},
		{name: "legacy numel mismatch", file: legacyOf(odict{{"w", tens{key: "0", class: "FloatStorage", numel: 3, size: []int64{2}, stride: []int64{1}}}},
			map[string][]byte{"0": le([]float32{1, 2})}, map[string]int{"0": 4}), kind: vram.ErrArgument, msg: "holds 2 elements, the pickle says 3"},
		{name: "legacy storage view", file: func() []byte {
			f := legacyOf(odict{{"w", f32("0", 2)}}, map[string][]byte{"0": le([]float32{1, 2})}, map[string]int{"0": 4})
			i := bytes.Index(f, []byte("cpu"))
			j := bytes.IndexByte(f[i:], opNone)
			f[i+j] = opNewTrue
			return f
		}(), kind: vram.ErrArgument, msg: "storage view"},
		{name: "legacy tar", file: append(make([]byte, 257), []byte("ustar\x0000")...), kind: vram.ErrArgument, msg: "tar format"},
		{name: "safetensors", file: append([]byte{2, 0, 0, 0, 0, 0, 0, 0}, []byte("{}")...), kind: vram.ErrArgument, msg: "nn.Load"},
		{name: "zip without data.pkl", file: zipOf(t, []record{{name: "x/y", data: []byte("z")}}), kind: vram.ErrArgument, msg: "without a data.pkl"},
		{name: "torchscript", file: zipOf(t, []record{{name: "m/data.pkl", data: pickle(odict{})}, {name: "m/constants.pkl", data: pickle(tup{})}}), kind: vram.ErrArgument, msg: "TorchScript"},
		{name: "two archives", file: zipOf(t, []record{{name: "a/data.pkl", data: pickle(odict{})}, {name: "b/data.pkl", data: pickle(odict{})}}), kind: vram.ErrArgument, msg: "two data.pkl"},
		{name: "bad byteorder", file: zipOf(t, []record{{name: "a/data.pkl", data: pickle(odict{})}, {name: "a/byteorder", data: []byte("middle")}}), kind: vram.ErrArgument, msg: "byteorder"},
		{name: "deflate ratio lie", file: lyingZip(t, zip.Deflate, 200<<20), kind: vram.ErrArgument, msg: "zip bomb"},
		{name: "stored size lie", file: lyingZip(t, zip.Store, 1<<20), kind: vram.ErrArgument, msg: "truncated file"},
		{name: "pickle above MaxPickleBytes", file: ok, opts: Options{MaxPickleBytes: 10}, kind: vram.ErrArgument, msg: "above the limit"},
		{name: "deflated storage above MaxBytes", file: zipOf(t, []record{
			{name: "a/data.pkl", data: pickle(odict{{"w", tens{key: "0", class: "ByteStorage", numel: int64(len(zeros)), size: []int64{1}, stride: []int64{1}}}})},
			{name: "a/data/0", data: zeros, method: zip.Deflate}}), opts: Options{MaxBytes: 1 << 20}, kind: vram.ErrArgument, msg: "Options.MaxBytes"},
		// Python writes a str with lone surrogates as bytes that are no
		// UTF-8; replaced by U+FFFD, two such keys became one, and one of
		// the tensors was dropped without a word.
		{name: "keys that are not UTF-8", file: archiveOf(t, odict{{"w\xed\xb3\xbf", f32("0", 1)}, {"w\xed\xb3\xbe", f32("1", 1)}},
			map[string][]byte{"0": le([]float32{1}), "1": le([]float32{2})}), kind: vram.ErrArgument, msg: "not valid UTF-8"},
		{name: "a key that is not UTF-8", file: archiveOf(t, odict{{"w\xff", f32("0", 1)}}, map[string][]byte{"0": le([]float32{1})}),
			kind: vram.ErrArgument, msg: "not valid UTF-8"},
		{name: "a long key, no state dict", file: archiveOf(t, odict{{longKey, nil}}, nil), kind: vram.ErrArgument, msg: "no state dict"},
		{name: "a long key, not a tensor", file: archiveOf(t, odict{{"sd", odict{{longKey, nil}}}}, nil), opts: Options{Key: "sd"}, kind: vram.ErrArgument, msg: "not a tensor"},
		{name: "a long key, a bad view", file: archiveOf(t, odict{{longKey, tens{key: "0", class: "FloatStorage", numel: 2, size: []int64{4}, stride: []int64{1}}}}, nil),
			kind: vram.ErrArgument, msg: "needs 16 bytes"},
		{name: "a long key, a missing storage", file: archiveOf(t, odict{{longKey, f32("0", 2)}}, nil), kind: vram.ErrArgument, msg: "no data/0 record"},
		{name: "bad CRC", file: func() []byte {
			f := bytes.Clone(ok)
			i := bytes.Index(f, le([]float32{1, 2}))
			f[i] ^= 1
			return f
		}(), kind: vram.ErrArgument, msg: "checksum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sd, err := read(t, tt.file, tt.opts)
			if err == nil {
				sd.Release()
				t.Fatal("no error")
			}
			if tt.global != "" {
				var ge *GlobalError
				if !errors.As(err, &ge) || ge.Module+"."+ge.Name != tt.global || !errors.Is(err, vram.ErrArgument) {
					t.Fatalf("error %v, want a GlobalError for %s", err, tt.global)
				}
				return
			}
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %.2000v, want %v with %q", err, tt.kind, tt.msg)
			}
			if len(err.Error()) > 2000 {
				t.Errorf("error of %d bytes: %.300s", len(err.Error()), err)
			}
		})
	}
}

// TestMemoBounded checks that sparse memo indices cost memory in
// proportion to the pickle's size only, not to the largest index.
func TestMemoBounded(t *testing.T) {
	var b bytes.Buffer
	b.Write([]byte{opProto, 4, opNone})
	for i := range 1 << 16 {
		b.WriteByte(opLongBinPut)
		binary.Write(&b, binary.LittleEndian, uint32(i*1000))
	}
	b.WriteByte(opStop)
	_, err := read(t, withPickle(t, b.Bytes()), Options{})
	if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), "holds a None") {
		t.Fatalf("error %v", err)
	}
}

// TestDeepTupleMessage builds a persistent id nested a million tuples
// deep: the error message must not recurse through it (with five million
// levels, formatting it in full overflowed the stack).
func TestDeepTupleMessage(t *testing.T) {
	const depth = 1 << 20
	p := make([]byte, 0, depth+8)
	p = append(p, opProto, 2, opNone)
	for range depth {
		p = append(p, opTuple1)
	}
	p = append(p, opBinPersID, opStop)
	_, err := read(t, withPickle(t, p), Options{})
	if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), "persistent id ((((...)))") {
		t.Fatalf("error %v", err)
	}
}

// TestBigEndianUntyped reads a big-endian file whose tensor views an
// untyped storage: its bytes swap per element of the tensor's dtype.
func TestBigEndianUntyped(t *testing.T) {
	root := odict{{"w", tens{key: "0", class: "UntypedStorage", numel: 8, size: []int64{2}, stride: []int64{1}, v3: "float32"}}}
	file := zipOf(t, []record{
		{name: "a/data.pkl", data: pickle(root)},
		{name: "a/byteorder", data: []byte("big")},
		{name: "a/data/0", data: []byte{0x3f, 0xc0, 0, 0, 0xc0, 0, 0, 0}},
	})
	sd := mustRead(t, file, Options{})
	if got := sd[0].Tensor.Float64s(); !slices.Equal(got, []float64{1.5, -2}) {
		t.Errorf("got %v, want [1.5 -2]", got)
	}
}

// TestErrorOffsets checks that the offset an error gives is the opcode's
// in the data holding the pickle: for the legacy format, several pickles
// in a row, the offset in the file.
func TestErrorOffsets(t *testing.T) {
	bad := odict{{"w", call{module: "os", name: "system", args: tup{"ls"}}}}
	tests := []struct {
		name string
		file []byte
	}{
		{"zip", archiveOf(t, bad, nil)},
		{"legacy", legacyOf(bad, nil, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pkl := tt.file
			if tt.name == "zip" {
				pkl = pickle(bad)
			}
			want := int64(bytes.Index(pkl, []byte("cos\nsystem\n")))
			_, err := read(t, tt.file, Options{})
			var ge *GlobalError
			if !errors.As(err, &ge) || ge.Offset != want {
				t.Fatalf("error %v, want a GlobalError at offset %d", err, want)
			}
		})
	}
}
