package tensorfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/safetensors"
)

func TestDecodeKeepsBytes(t *testing.T) {
	tests := []struct {
		name string
		st   safetensors.Tensor
		dt   vram.DType
		want []byte
	}{
		{"F32 signalling NaN", safetensors.Tensor{DType: "F32", Shape: []int{1}, Data: []byte{1, 0, 0x80, 0x7f}}, vram.Float32, []byte{1, 0, 0x80, 0x7f}},
		{"F16 signalling NaN", safetensors.Tensor{DType: "F16", Shape: []int{}, Data: []byte{1, 0x7c}}, vram.Float16, []byte{1, 0x7c}},
		{"BF16 signalling NaN", safetensors.Tensor{DType: "BF16", Shape: []int{1}, Data: []byte{0x81, 0x7f}}, vram.BFloat16, []byte{0x81, 0x7f}},
		{"I8 extremes", safetensors.Tensor{DType: "I8", Shape: []int{2}, Data: []byte{0x80, 0x7f}}, vram.Int8, []byte{0x80, 0x7f}},
		{"BOOL bytes other than 0 and 1", safetensors.Tensor{DType: "BOOL", Shape: []int{3}, Data: []byte{0, 2, 0xff}}, vram.Bool, []byte{0, 1, 1}},
		{"converted U8 to BOOL", safetensors.Tensor{DType: "U8", Shape: []int{2}, Data: []byte{0, 7}}, vram.Bool, []byte{0, 1}},
		{"empty", safetensors.Tensor{DType: "F32", Shape: []int{0, 2}, Data: []byte{}}, vram.Float32, []byte{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.st, tt.dt)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if b := got.RawBytes(); !bytes.Equal(b, tt.want) {
				t.Errorf("bytes % x, want % x", b, tt.want)
			}
			if len(got.Shape()) != len(tt.st.Shape) {
				t.Errorf("shape %v, want %v", got.Shape(), tt.st.Shape)
			}
			enc, err := Encode(got)
			if err != nil {
				t.Fatal(err)
			}
			if tt.st.DType == enc.DType && tt.dt != vram.Bool && !bytes.Equal(enc.Data, tt.st.Data) {
				t.Errorf("Encode gives % x, want % x", enc.Data, tt.st.Data)
			}
		})
	}
}

// TestWritePermissions checks that Write gives a new file the permissions
// os.Create would (the umask's choice, not a fixed 0644 that would show a
// private model to every user) and keeps those of a file it replaces.
func TestWritePermissions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref")
	f, err := os.OpenFile(ref, os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	fi, err := os.Stat(ref)
	if err != nil {
		t.Fatal(err)
	}
	asCreated := fi.Mode().Perm()
	tests := []struct {
		name string
		old  os.FileMode // the permissions of the file replaced; 0 for none
		want os.FileMode
	}{
		{"new file", 0, asCreated},
		{"private file", 0o600, 0o600},
		{"group-readable file", 0o640, 0o640},
		{"read-only file", 0o444, 0o444},
	}
	tensors := map[string]safetensors.Tensor{"x": {DType: "U8", Shape: []int{1}, Data: []byte{1}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".safetensors")
			if tt.old != 0 {
				if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tt.old); err != nil {
					t.Fatal(err)
				}
			}
			if err := Write(path, tensors, nil); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tt.want {
				t.Errorf("permissions %v, want %v", got, tt.want)
			}
			if _, _, err := Read(path); err != nil {
				t.Error(err)
			}
		})
	}
	// The reference file and one per test: no temporary file is left.
	if entries, _ := os.ReadDir(dir); len(entries) != len(tests)+1 {
		for _, e := range entries {
			t.Log(e.Name())
		}
		t.Errorf("directory holds %d files, want %d", len(entries), len(tests)+1)
	}
}

// TestLayoutsOnADevice encodes and fills tensors of several layouts on a
// simulated GPU: the bytes are the row-major ones of the CPU, and a layout
// whose elements fill one block of memory goes through no temporary on
// the device.
func TestLayoutsOnADevice(t *testing.T) {
	dev := vram.Sim(0)
	tests := []struct {
		name  string
		make  func(x *vram.Tensor) *vram.Tensor // of x, on dev, shape [2, 3, 4, 5]
		dense bool                              // its elements fill one block
	}{
		{"contiguous", func(x *vram.Tensor) *vram.Tensor { return x.Clone() }, true},
		{"channels-last", func(x *vram.Tensor) *vram.Tensor { return x.ToMemoryFormat(vram.ChannelsLast) }, true},
		{"transposed", func(x *vram.Tensor) *vram.Tensor {
			c := x.Transpose(0, 3).Contiguous()
			defer c.Release()
			return c.Transpose(0, 3)
		}, true},
		{"a slice with gaps", func(x *vram.Tensor) *vram.Tensor {
			w := vram.Zeros(vram.Shape{2, 3, 4, 10}, dev)
			defer w.Release()
			return w.Narrow(3, 0, 5)
		}, false},
	}
	host := vram.Arange(0, 120, 1, vram.CPU).Reshape(2, 3, 4, 5)
	defer host.Release()
	want := host.RawBytes()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := host.To(dev)
			defer x.Release()
			dst := tt.make(x)
			defer dst.Release()
			peak := func(f func()) int64 {
				vram.ResetPeakMemoryStats(dev)
				before := vram.MemoryAllocated(dev)
				f()
				return vram.MaxMemoryAllocated(dev) - before
			}
			// Fill dst from the host, then encode it: the same bytes.
			var extra int64
			if err := vram.Catch(func() {
				extra = peak(func() { vram.NoGrad(func() { CopyInto(dst, host) }) })
			}); err != nil {
				t.Fatal(err)
			}
			var st safetensors.Tensor
			var err error
			extra = max(extra, peak(func() { st, err = Encode(dst) }))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(st.Data, want) {
				t.Errorf("encoded bytes differ from the CPU's")
			}
			if tt.dense && extra != 0 {
				t.Errorf("took %d bytes on the device", extra)
			}
		})
	}
}

// TestDecodeErrors checks that Decode returns, not panics, the errors of
// values and shapes that dt's tensors cannot hold, and that CheckDecode
// gives the same ones.
func TestDecodeErrors(t *testing.T) {
	huge := []int{0, 1 << 40, 1 << 40} // no elements, but no vram tensor has it
	tests := []struct {
		name string
		st   safetensors.Tensor
		dt   vram.DType
		want string
	}{
		{"NaN into int32", safetensors.Tensor{DType: "F32", Shape: []int{1}, Data: []byte{0, 0, 0xc0, 0x7f}}, vram.Int32, "NaN"},
		{"infinity into int64", safetensors.Tensor{DType: "F32", Shape: []int{1}, Data: []byte{0, 0, 0x80, 0x7f}}, vram.Int64, "Inf"},
		{"1e20 into int8", safetensors.Tensor{DType: "F64", Shape: []int{}, Data: []byte{0, 0, 0, 0, 0, 0, 0, 0x44}}, vram.Int8, "int8"},
		{"U64 too large for int64", safetensors.Tensor{DType: "U64", Shape: []int{1}, Data: []byte{0, 0, 0, 0, 0, 0, 0, 0x80}}, vram.Int64, "does not fit"},
		{"huge empty shape as is", safetensors.Tensor{DType: "F32", Shape: huge}, vram.Float32, "shape"},
		{"huge empty shape converted", safetensors.Tensor{DType: "F32", Shape: huge}, vram.Float64, "shape"},
		{"huge empty shape into an integer", safetensors.Tensor{DType: "U8", Shape: huge}, vram.Int64, "shape"},
		{"huge empty shape into bool", safetensors.Tensor{DType: "BOOL", Shape: huge}, vram.Bool, "shape"},
		{"unsupported dtype", safetensors.Tensor{DType: "F8_E4M3", Shape: []int{1}, Data: []byte{0}}, vram.Float32, "not supported"},
		// Data that does not match the shape, from a reader that
		// fetched too few or too many bytes, is refused rather than
		// read past its end.
		{"short data as is", safetensors.Tensor{DType: "F32", Shape: []int{2}, Data: make([]byte, 4)}, vram.Float32, "2 elements of 4 bytes, but its data has 4 bytes"},
		{"short data converted", safetensors.Tensor{DType: "F32", Shape: []int{2}, Data: make([]byte, 4)}, vram.Float64, "data has 4 bytes"},
		{"short data into an integer", safetensors.Tensor{DType: "I32", Shape: []int{2, 2}, Data: make([]byte, 12)}, vram.Int64, "data has 12 bytes"},
		{"long data", safetensors.Tensor{DType: "U8", Shape: []int{}, Data: make([]byte, 2)}, vram.Bool, "data has 2 bytes"},
		{"no data", safetensors.Tensor{DType: "F16", Shape: []int{3}}, vram.Float32, "data has 0 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var x *vram.Tensor
			var decErr, checkErr error
			if p := recovered(func() { x, decErr = Decode(tt.st, tt.dt) }); p != nil {
				t.Fatalf("Decode panicked: %v", p)
			}
			if x != nil {
				x.Release()
			}
			if decErr == nil || !strings.Contains(decErr.Error(), tt.want) {
				t.Errorf("Decode: error %v, want one about %q", decErr, tt.want)
			}
			if x != nil {
				t.Errorf("Decode returned a tensor with its error")
			}
			if p := recovered(func() { checkErr = CheckDecode(tt.st, tt.dt) }); p != nil {
				t.Fatalf("CheckDecode panicked: %v", p)
			}
			if checkErr == nil || decErr != nil && checkErr.Error() != decErr.Error() {
				t.Errorf("CheckDecode: error %v, want Decode's %v", checkErr, decErr)
			}
		})
	}
}

// recovered runs f and returns what it panicked with, nil if nothing.
func recovered(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestWriteErrorsNamePath checks that an error creating the file names the
// caller's path, not that of the temporary file Write creates beside it,
// which the caller never chose and which no longer exists.
func TestWriteErrorsNamePath(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		path string
	}{
		{"missing directory", filepath.Join(dir, "nope", "model.safetensors")},
		{"missing directory, trailing slash", filepath.Join(dir, "nope") + string(filepath.Separator)},
		{"empty path", ""},
	}
	tensors := map[string]safetensors.Tensor{"x": {DType: "U8", Shape: []int{1}, Data: []byte{1}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Write(tt.path, tensors, nil)
			var pe *fs.PathError
			if !errors.As(err, &pe) || pe.Path != tt.path || strings.Contains(err.Error(), ".tmp") {
				t.Fatalf("error %v, want an *fs.PathError naming %q", err, tt.path)
			}
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("error %v does not match fs.ErrNotExist", err)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Write left %d files in %s", len(entries), dir)
	}
}
