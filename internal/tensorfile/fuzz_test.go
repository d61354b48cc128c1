package tensorfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/fuzztest"
	"github.com/vramgo/vram/internal/safetensors"
)

// maxFuzzFile bounds the files FuzzRead reads: room for a header with a
// few tensors and their data.
const maxFuzzFile = 4 << 10

// dtypes are vram's dtypes, those a file's tensors are decoded into.
var dtypes = []vram.DType{vram.Float32, vram.Float64, vram.Float16, vram.BFloat16, vram.Int32, vram.Int64, vram.Int8, vram.Bool}

// FuzzRead checks Read and what its callers do with the tensors it
// returns. Read refuses a bad file with an error matching vram.ErrArgument,
// without allocating the sizes its header claims; each tensor it accepts
// decodes into every vram dtype without a panic, Decode failing exactly
// when CheckDecode does, into a CPU tensor of the file's shape, and a
// tensor of the dtype's own safetensors dtype encodes back to its bytes.
// Seeds are in testdata/fuzz/FuzzRead.
func FuzzRead(f *testing.F) {
	path := filepath.Join(f.TempDir(), "in.safetensors")
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > maxFuzzFile {
			return
		}
		if err := os.WriteFile(path, in, 0o600); err != nil {
			t.Fatal(err)
		}
		before := fuzztest.HeapAllocated()
		tensors, _, err := Read(path)
		// Read buffers the file in 1 MiB, and may size its header buffer
		// by the claimed length, up to 1 MiB.
		fuzztest.CheckAllocated(t, "Read", len(in), before, 4<<20, 256)
		if err != nil {
			if !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("error %q does not match vram.ErrArgument", err)
			}
			return
		}
		for name, st := range tensors {
			for _, dt := range dtypes {
				checkDecode(t, name, st, dt, len(in))
			}
		}
	})
}

// checkDecode checks CheckDecode and Decode of st, the tensor name of a
// file of n bytes, into dt.
func checkDecode(t *testing.T, name string, st safetensors.Tensor, dt vram.DType, n int) {
	t.Helper()
	var checkErr, decErr error
	var x *vram.Tensor
	before := fuzztest.HeapAllocated()
	if p := vram.Catch(func() { checkErr = CheckDecode(st, dt) }); p != nil {
		t.Fatalf("%q into %s: CheckDecode panicked: %v", name, dt, p)
	}
	if p := vram.Catch(func() { x, decErr = Decode(st, dt) }); p != nil {
		t.Fatalf("%q into %s: Decode panicked: %v", name, dt, p)
	}
	// Decoding through float64 holds each element as 8 bytes, twice.
	fuzztest.CheckAllocated(t, "Decode", n, before, 1<<20, 64)
	if (checkErr == nil) != (decErr == nil) {
		t.Fatalf("%q into %s: CheckDecode gives %v, Decode %v", name, dt, checkErr, decErr)
	}
	if decErr != nil {
		if x != nil {
			t.Fatalf("%q into %s: Decode returned a tensor and the error %v", name, dt, decErr)
		}
		return
	}
	defer x.Release()
	if x.DType() != dt || x.Device() != vram.CPU || !slices.Equal([]int(x.Shape()), st.Shape) && len(st.Shape)+len(x.Shape()) > 0 {
		t.Fatalf("%q into %s: decoded a %s %v tensor on %v from %s %v", name, dt, x.DType(), x.Shape(), x.Device(), st.DType, st.Shape)
	}
	if !AsIs(st, dt) {
		return
	}
	if !bytes.Equal(x.RawBytes(), st.Data) {
		t.Fatalf("%q into %s: Decode changed the bytes", name, dt)
	}
	enc, err := Encode(x)
	if err != nil {
		t.Fatalf("%q into %s: Encode: %v", name, dt, err)
	}
	if enc.DType != st.DType || !bytes.Equal(enc.Data, st.Data) {
		t.Fatalf("%q into %s: Encode gives %s % x, want %s % x", name, dt, enc.DType, enc.Data, st.DType, st.Data)
	}
}

// fuzzSeeds returns the seed corpus of FuzzRead: files of every dtype vram
// saves and of those it converts, and files that claim more than they
// hold or that vram's tensors cannot hold.
func fuzzSeeds(tb testing.TB) []fuzztest.Seed {
	var seeds []fuzztest.Seed
	file := func(name string, tensors map[string]safetensors.Tensor) {
		var buf bytes.Buffer
		if err := safetensors.Write(&buf, tensors, map[string]string{"format": "pt"}); err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, fuzztest.Seed{Name: name, Args: []any{buf.Bytes()}})
	}
	saved := map[string]safetensors.Tensor{}
	for _, dt := range dtypes {
		x := vram.Arange(-2, 4, 1, vram.CPU).Reshape(2, 3)
		y := x.Cast(dt)
		st, err := Encode(y)
		y.Release()
		x.Release()
		if err != nil {
			tb.Fatal(err)
		}
		saved[dt.String()] = st
	}
	file("saved", saved)
	file("converted", map[string]safetensors.Tensor{
		"u8":  {DType: "U8", Shape: []int{3}, Data: []byte{0, 1, 255}},
		"i16": {DType: "I16", Shape: []int{2}, Data: []byte{0xff, 0x7f, 0x00, 0x80}},
		"u16": {DType: "U16", Shape: []int{1}, Data: []byte{0xff, 0xff}},
		"u32": {DType: "U32", Shape: []int{1}, Data: []byte{0xff, 0xff, 0xff, 0xff}},
		"u64": {DType: "U64", Shape: []int{1}, Data: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		"f8":  {DType: "F8_E4M3", Shape: []int{2}, Data: []byte{0x38, 0xb8}},
	})
	file("scalars-and-empties", map[string]safetensors.Tensor{
		"scalar": {DType: "F64", Shape: []int{}, Data: []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}},
		"empty":  {DType: "F32", Shape: []int{0, 3}, Data: nil},
		"nan":    {DType: "F32", Shape: []int{1}, Data: []byte{1, 0, 0x80, 0x7f}},
		"inf":    {DType: "F32", Shape: []int{1}, Data: []byte{0, 0, 0x80, 0x7f}},
	})
	file("empty-with-huge-dimensions", map[string]safetensors.Tensor{
		"x": {DType: "F32", Shape: []int{0, 1 << 40, 1 << 40}, Data: nil},
	})
	file("no-tensors", nil)
	return seeds
}

// TestFuzzSeeds checks the committed seed corpus of FuzzRead (run with
// -update-fuzz-seeds to rewrite it).
func TestFuzzSeeds(t *testing.T) {
	fuzztest.Check(t, "FuzzRead", fuzzSeeds(t), maxFuzzFile)
}
