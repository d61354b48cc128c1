package nn

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/half"
	"github.com/vramgo/vram/internal/safetensors"
)

// StateDict returns m's parameters and buffers ([Base.RegisterBuffer]) by
// their dotted names (PyTorch's state_dict keys). The tensors are the
// module's own, not copies: they belong to the module and must not be
// released.
func StateDict(m Module) map[string]*vram.Tensor {
	named := stateTensors(m)
	out := make(map[string]*vram.Tensor, len(named))
	for _, p := range named {
		out[p.Name] = p.Tensor
	}
	return out
}

// stateTensors returns m's parameters, then its buffers, by name.
func stateTensors(m Module) []NamedParameter {
	return append(m.NamedParameters(), NamedBuffers(m)...)
}

var stNames = map[vram.DType]string{
	vram.Float32:  "F32",
	vram.Float64:  "F64",
	vram.Float16:  "F16",
	vram.BFloat16: "BF16",
	vram.Int32:    "I32",
	vram.Int64:    "I64",
	vram.Int8:     "I8",
	vram.Bool:     "BOOL",
}

// encodeTensor returns t's elements as safetensors raw bytes of its dtype.
func encodeTensor(t *vram.Tensor) (safetensors.Tensor, error) {
	name, ok := stNames[t.DType()]
	if !ok {
		return safetensors.Tensor{}, fmt.Errorf("dtype %s cannot be saved", t.DType())
	}
	n := t.NumElements()
	b := make([]byte, n*t.DType().Size())
	switch t.DType() {
	case vram.Int64:
		for i, v := range t.Int64s() {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
		}
	case vram.Int32:
		for i, v := range t.Int32s() {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
		}
	case vram.Int8:
		for i, v := range t.Int64s() {
			b[i] = byte(int8(v))
		}
	case vram.Bool:
		for i, v := range t.Bools() {
			if v {
				b[i] = 1
			}
		}
	default:
		// Float64s is exact for every float dtype, so converting back is
		// too.
		for i, v := range t.Float64s() {
			switch t.DType() {
			case vram.Float32:
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
			case vram.Float64:
				binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
			case vram.Float16:
				binary.LittleEndian.PutUint16(b[2*i:], half.F16(float32(v)))
			case vram.BFloat16:
				binary.LittleEndian.PutUint16(b[2*i:], half.BF16(float32(v)))
			}
		}
	}
	return safetensors.Tensor{DType: name, Shape: []int(t.Shape()), Data: b}, nil
}

// decoder returns a function that reads element i of raw safetensors data
// of the named dtype as float64, for every dtype but the 8-bit floats.
func decoder(dtype string) (func(b []byte, i int) float64, error) {
	switch dtype {
	case "F32":
		return func(b []byte, i int) float64 {
			return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}, nil
	case "F64":
		return func(b []byte, i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])) }, nil
	case "F16":
		return func(b []byte, i int) float64 { return float64(half.F16To32(binary.LittleEndian.Uint16(b[2*i:]))) }, nil
	case "BF16":
		return func(b []byte, i int) float64 { return float64(half.BF16To32(binary.LittleEndian.Uint16(b[2*i:]))) }, nil
	case "I8":
		return func(b []byte, i int) float64 { return float64(int8(b[i])) }, nil
	case "U8", "BOOL":
		return func(b []byte, i int) float64 { return float64(b[i]) }, nil
	case "I16":
		return func(b []byte, i int) float64 { return float64(int16(binary.LittleEndian.Uint16(b[2*i:]))) }, nil
	case "U16":
		return func(b []byte, i int) float64 { return float64(binary.LittleEndian.Uint16(b[2*i:])) }, nil
	case "I32":
		return func(b []byte, i int) float64 { return float64(int32(binary.LittleEndian.Uint32(b[4*i:]))) }, nil
	case "U32":
		return func(b []byte, i int) float64 { return float64(binary.LittleEndian.Uint32(b[4*i:])) }, nil
	case "I64":
		return func(b []byte, i int) float64 { return float64(int64(binary.LittleEndian.Uint64(b[8*i:]))) }, nil
	case "U64":
		return func(b []byte, i int) float64 { return float64(binary.LittleEndian.Uint64(b[8*i:])) }, nil
	}
	return nil, fmt.Errorf("dtype %s is not supported", dtype)
}

// Save writes m's parameters and buffers to the safetensors file path, under their
// PyTorch state-dict names and in their own dtypes, with the metadata
// {"format": "pt"} that Hugging Face tools expect; PyTorch reads it with
// safetensors.torch.load_file. The file is written to a temporary file in
// the same directory and renamed into place, so path holds either the old
// contents or the complete new ones, never a partial file.
func Save(m Module, path string) (err error) {
	if m == nil {
		return fmt.Errorf("nn: save %s: nil module", path)
	}
	tensors := map[string]safetensors.Tensor{}
	for _, p := range stateTensors(m) {
		var st safetensors.Tensor
		var encErr error
		err := vram.Catch(func() { st, encErr = encodeTensor(p.Tensor) })
		if err == nil {
			err = encErr
		}
		if err != nil {
			return fmt.Errorf("nn: save %s: parameter %q: %w", path, p.Name, err)
		}
		tensors[p.Name] = st
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("nn: save: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	if err := safetensors.Write(w, tensors, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("nn: save %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("nn: save %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("nn: save: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("nn: save: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("nn: save: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("nn: save: %w", err)
	}
	return nil
}

// Load reads the safetensors file path, written by [Save] or by PyTorch's
// safetensors.torch.save_file(model.state_dict(), path), into m's
// parameters and buffers in place: each keeps its identity, device and
// dtype, and values of another dtype are converted. The file must hold
// exactly m's parameter and buffer names with the same shapes (PyTorch's
// strict loading); otherwise Load returns an error listing the missing and
// unexpected keys and the shape mismatches, and changes nothing.
//
// The values are decoded on the host and written into each tensor in
// place, so that loading into a model on a full device needs no device
// memory beyond the model's own, except for a tensor that is not
// contiguous (a channels-last convolution weight), which takes a temporary
// of its size. An error from the device (out of memory for that temporary,
// a released parameter) is returned, not panicked, and may leave the
// tensors before the failing one loaded.
func Load(m Module, path string) error {
	if m == nil {
		return fmt.Errorf("nn: load %s: nil module", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("nn: load: %w", err)
	}
	defer f.Close()
	tensors, _, err := safetensors.Read(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fmt.Errorf("nn: load %s: %w", path, err)
	}
	params := stateTensors(m)
	var missing, unexpected, problems []string
	have := map[string]bool{}
	for _, p := range params {
		have[p.Name] = true
		st, ok := tensors[p.Name]
		if !ok {
			missing = append(missing, p.Name)
			continue
		}
		if p.Tensor.Released() {
			problems = append(problems, fmt.Sprintf("%q was released", p.Name))
			continue
		}
		if !slices.Equal(st.Shape, []int(p.Tensor.Shape())) {
			problems = append(problems, fmt.Sprintf("%q has shape %v in the file and %v in the model", p.Name, vram.Shape(st.Shape), p.Tensor.Shape()))
		}
		if _, err := decoder(st.DType); err != nil {
			problems = append(problems, fmt.Sprintf("%q: %v", p.Name, err))
		}
	}
	for name := range tensors {
		if !have[name] {
			unexpected = append(unexpected, name)
		}
	}
	if len(missing)+len(unexpected)+len(problems) > 0 {
		sort.Strings(unexpected)
		var parts []string
		if len(missing) > 0 {
			parts = append(parts, "missing keys "+quoteAll(missing))
		}
		if len(unexpected) > 0 {
			parts = append(parts, "unexpected keys "+quoteAll(unexpected))
		}
		parts = append(parts, problems...)
		return fmt.Errorf("nn: load %s: %s", path, strings.Join(parts, "; "))
	}
	// Decode every tensor on the host before changing any, so that a
	// value that cannot be decoded leaves the model as it was.
	srcs := make([]*vram.Tensor, 0, len(params))
	defer func() {
		for _, src := range srcs {
			src.Release()
		}
	}()
	for _, p := range params {
		var src *vram.Tensor
		var decErr error
		err := vram.Catch(func() { src, decErr = decodeTensor(tensors[p.Name], p.Tensor.DType()) })
		if err == nil {
			err = decErr
		}
		if err != nil {
			return fmt.Errorf("nn: load %s: %q: %w", path, p.Name, err)
		}
		srcs = append(srcs, src)
	}
	for i, p := range params {
		if err := vram.Catch(func() { vram.NoGrad(func() { copyFromHost(p.Tensor, srcs[i]) }) }); err != nil {
			return fmt.Errorf("nn: load %s: %q: %w", path, p.Name, err)
		}
	}
	return nil
}

// decodeTensor returns st's values as a new CPU tensor of dtype dt.
func decodeTensor(st safetensors.Tensor, dt vram.DType) (*vram.Tensor, error) {
	shape := vram.Shape(slices.Clone(st.Shape))
	if shape == nil {
		shape = vram.Shape{} // a scalar, not FromSlice's 1-D default
	}
	if st.DType == "I64" && dt == vram.Int64 {
		vals := make([]int64, len(st.Data)/8)
		for i := range vals {
			vals[i] = int64(binary.LittleEndian.Uint64(st.Data[8*i:]))
		}
		return vram.FromSlice(vals, shape, vram.CPU, dt), nil
	}
	dec, err := decoder(st.DType)
	if err != nil {
		return nil, err
	}
	vals := make([]float64, shape.NumElements())
	for i := range vals {
		vals[i] = dec(st.Data, i)
	}
	return vram.FromSlice(vals, shape, vram.CPU, dt), nil
}

// copyFromHost copies src, a CPU tensor of dst's shape and dtype, into dst
// in place. A contiguous dst on another device takes the bytes straight
// from the host, with no temporary on its device.
func copyFromHost(dst, src *vram.Tensor) {
	switch {
	case dst.Device() == src.Device():
		dst.CopyFrom(src)
	case dst.IsContiguous():
		dst.SetRawBytes(src.RawBytes())
	default:
		tmp := src.To(dst.Device())
		defer tmp.Release()
		dst.CopyFrom(tmp)
	}
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
