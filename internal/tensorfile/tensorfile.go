// Package tensorfile stores vram tensors in safetensors files: it encodes
// tensors of every dtype vram has into the format's raw bytes, decodes any
// dtype the format has into a tensor of a chosen dtype, and writes files
// atomically. Packages nn (model state) and optim (optimizer state) share
// it.
package tensorfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/internal/half"
	"github.com/vramgo/vram/internal/safetensors"
)

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

// Encode returns t's elements as safetensors raw bytes of its dtype. The
// bytes are t's own, row-major and little-endian as the format stores
// them, so that every value, NaN payloads included, is saved bit for bit.
// A t on a device whose elements fill one block of its memory in another
// order (channels-last, transposed) is read in that order and reordered
// on the host, with no temporary on its device.
func Encode(t *vram.Tensor) (safetensors.Tensor, error) {
	name, ok := stNames[t.DType()]
	if !ok {
		return safetensors.Tensor{}, fmt.Errorf("dtype %s cannot be saved", t.DType())
	}
	return safetensors.Tensor{DType: name, Shape: []int(t.Shape()), Data: rowMajorBytes(t)}, nil
}

// rowMajorBytes returns t.RawBytes(), reading a t on a device whose
// elements fill one block of memory in another order as it lies there.
func rowMajorBytes(t *vram.Tensor) []byte {
	if t.Device() == vram.CPU || t.IsContiguous() {
		return t.RawBytes()
	}
	order, ok := memoryOrder(t)
	if !ok {
		return t.RawBytes()
	}
	var b []byte
	vram.NoGrad(func() {
		v := t.Permute(order...)
		defer v.Release()
		if !v.IsContiguous() {
			b = t.RawBytes()
			return
		}
		host := vram.Empty(v.Shape(), vram.CPU, t.DType())
		defer host.Release()
		host.SetRawBytes(v.RawBytes())
		inverse := make([]int, len(order))
		for i, d := range order {
			inverse[d] = i
		}
		back := host.Permute(inverse...)
		defer back.Release()
		b = back.RawBytes()
	})
	return b
}

// Decodable returns an error unless Decode reads the named safetensors
// dtype (every dtype of the format but the 8-, 6- and 4-bit floats and the
// complex numbers).
func Decodable(dtype string) error {
	_, err := decoder(dtype)
	return err
}

// decoder returns a function that reads element i of raw safetensors data
// of the named dtype as float64, for every dtype but the 8-, 6- and 4-bit
// floats and the complex numbers.
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

// intRange returns the range of the integer dtype dt, and false for a
// dtype that is not an integer one.
func intRange(dt vram.DType) (lo, hi int64, ok bool) {
	switch dt {
	case vram.Int8:
		return math.MinInt8, math.MaxInt8, true
	case vram.Int32:
		return math.MinInt32, math.MaxInt32, true
	case vram.Int64:
		return math.MinInt64, math.MaxInt64, true
	}
	return 0, 0, false
}

// intDecoder returns a function that reads element i of raw safetensors
// data of the named integer or BOOL dtype as int64, false for a U64 value
// above the largest int64, or nil for a dtype that is not an integer one.
func intDecoder(dtype string) func(b []byte, i int) (int64, bool) {
	switch dtype {
	case "I8":
		return func(b []byte, i int) (int64, bool) { return int64(int8(b[i])), true }
	case "U8":
		return func(b []byte, i int) (int64, bool) { return int64(b[i]), true }
	case "BOOL":
		return func(b []byte, i int) (int64, bool) { return int64(min(b[i], 1)), true }
	case "I16":
		return func(b []byte, i int) (int64, bool) { return int64(int16(binary.LittleEndian.Uint16(b[2*i:]))), true }
	case "U16":
		return func(b []byte, i int) (int64, bool) { return int64(binary.LittleEndian.Uint16(b[2*i:])), true }
	case "I32":
		return func(b []byte, i int) (int64, bool) { return int64(int32(binary.LittleEndian.Uint32(b[4*i:]))), true }
	case "U32":
		return func(b []byte, i int) (int64, bool) { return int64(binary.LittleEndian.Uint32(b[4*i:])), true }
	case "I64":
		return func(b []byte, i int) (int64, bool) { return int64(binary.LittleEndian.Uint64(b[8*i:])), true }
	case "U64":
		return func(b []byte, i int) (int64, bool) {
			v := binary.LittleEndian.Uint64(b[8*i:])
			return int64(v), v <= math.MaxInt64
		}
	}
	return nil
}

// intString formats element i of st, of an integer dtype, for an error.
func intString(st safetensors.Tensor, i int) string {
	if st.DType == "U64" {
		return strconv.FormatUint(binary.LittleEndian.Uint64(st.Data[8*i:]), 10)
	}
	v, _ := intDecoder(st.DType)(st.Data, i)
	return strconv.FormatInt(v, 10)
}

// Decode returns st's values as a new CPU tensor of dtype dt. When st
// holds dt's own safetensors dtype its bytes are taken as they are, so
// that every value, NaN payloads included, loads bit for bit (a BOOL byte
// other than 0 reads as true). Integers convert to an integer dt exactly;
// other conversions go through float64, floats truncating toward zero
// into integers. A value out of dt's range is an error, and so are data
// whose length is not that of st's dtype and shape, and a shape that no
// tensor of dt can have (sizes other than 0 whose product in bytes
// overflows an int64).
func Decode(st safetensors.Tensor, dt vram.DType) (t *vram.Tensor, err error) {
	if err := checkTensor(st, dt); err != nil {
		return nil, err
	}
	var decErr error
	if err := vram.Catch(func() { t, decErr = decode(st, dt) }); err != nil {
		return nil, err
	}
	return t, decErr
}

// checkTensor returns an error unless dt is one of vram's dtypes, a
// tensor of dt can have st's shape, and st's data has the bytes of its
// dtype and shape (for a dtype of whole bytes). The format counts a shape
// with a size of 0 as empty whatever its other sizes, but vram, whose
// strides are products of the sizes, refuses a shape whose sizes other
// than 0, times the element size, multiply past an int64, as [vram.Shape]
// says.
func checkTensor(st safetensors.Tensor, dt vram.DType) error {
	if _, ok := stNames[dt]; !ok {
		return &vram.Error{Op: "decode", Kind: vram.ErrDType, Detail: fmt.Sprintf("invalid dtype %v", dt)}
	}
	n, _, err := backend.CheckShape(st.Shape, dt.Size())
	if err != nil {
		// Not err itself, which lists every size of a shape that a
		// file may make millions long.
		return &vram.Error{Op: "decode", Kind: vram.ErrShape,
			Detail: fmt.Sprintf("no %s tensor can have shape %s: its sizes other than 0 multiply past an int64", dt, safetensors.ShapeString(st.Shape))}
	}
	// Data that a reader fetched short or long would be read past its
	// end, or taken in part.
	if bits, ok := safetensors.DTypeBits(st.DType); ok && bits%8 == 0 {
		if size := bits / 8; len(st.Data)%size != 0 || len(st.Data)/size != n {
			return &vram.Error{Op: "decode", Kind: vram.ErrArgument,
				Detail: fmt.Sprintf("%s %s holds %d elements of %d bytes, but its data has %d bytes", st.DType, safetensors.ShapeString(st.Shape), n, size, len(st.Data))}
		}
	}
	return nil
}

// decode is Decode of st, whose shape a tensor of dt can have. It panics
// with a *vram.Error for a value out of dt's range that converts through
// float64.
func decode(st safetensors.Tensor, dt vram.DType) (*vram.Tensor, error) {
	shape := vram.Shape(slices.Clone(st.Shape))
	if shape == nil {
		shape = vram.Shape{} // a scalar, not FromSlice's 1-D default
	}
	if name, ok := stNames[dt]; ok && name == st.DType {
		data := st.Data
		if dt == vram.Bool {
			data = make([]byte, len(st.Data))
			for i, b := range st.Data {
				if b != 0 {
					data[i] = 1
				}
			}
		}
		t := vram.Empty(shape, vram.CPU, dt)
		t.SetRawBytes(data)
		return t, nil
	}
	if lo, hi, ok := intRange(dt); ok {
		if dec := intDecoder(st.DType); dec != nil {
			// Integers to integers convert exactly, not through float64,
			// which holds only 53 bits.
			vals := make([]int64, shape.NumElements())
			for i := range vals {
				v, ok := dec(st.Data, i)
				if !ok || v < lo || v > hi {
					return nil, &vram.Error{Op: "decode", Kind: vram.ErrArgument,
						Detail: fmt.Sprintf("value %s of element %d of %s does not fit in %s", intString(st, i), i, st.DType, dt)}
				}
				vals[i] = v
			}
			return vram.FromSlice(vals, shape, vram.CPU, dt), nil
		}
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

// CopyInto copies src, a CPU tensor of dst's shape and dtype, into dst
// in place. A dst on another device whose elements fill one block of its
// memory, in row-major order or another (channels-last, transposed), takes
// the bytes straight from the host in that order, with no temporary on
// its device, so that it cannot run out of memory there; only a dst with
// gaps or overlaps between its elements takes a temporary of its size.
func CopyInto(dst, src *vram.Tensor) {
	switch {
	case dst.Device() == src.Device():
		dst.CopyFrom(src)
	case dst.IsContiguous():
		dst.SetRawBytes(src.RawBytes())
	default:
		if order, ok := memoryOrder(dst); ok {
			// Permuted into the order of its memory, dst is contiguous,
			// and src permuted alike lists its elements in that order.
			v, s := dst.Permute(order...), src.Permute(order...)
			defer v.Release()
			defer s.Release()
			if v.IsContiguous() {
				v.SetRawBytes(s.RawBytes())
				return
			}
		}
		tmp := src.To(dst.Device())
		defer tmp.Release()
		dst.CopyFrom(tmp)
	}
}

// memoryOrder returns t's dimensions in the order its elements lie in
// memory, outermost first, when they fill one block without gaps or
// overlaps; false otherwise.
func memoryOrder(t *vram.Tensor) ([]int, bool) {
	shape, strides := t.Shape(), t.Strides()
	order := make([]int, len(shape))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return strides[order[a]] > strides[order[b]] })
	step := 1 // the stride a dense innermost-first walk expects
	for k := len(order) - 1; k >= 0; k-- {
		d := order[k]
		if shape[d] != 1 && strides[d] != step {
			return nil, false
		}
		step *= shape[d]
	}
	return order, true
}

// Write writes tensors and metadata to the safetensors file path through a
// temporary file in the same directory, renamed into place once complete,
// so that path holds either its old contents or all of the new ones. The
// file keeps the permissions of the one it replaces; a new file gets those
// of any new file (0666 less the process's umask), as os.Create gives.
// A path that names something other than a regular file (a directory, a
// named pipe, a device such as /dev/null), which the rename would replace
// with a file, is an error, and nothing is written.
func Write(path string, tensors map[string]safetensors.Tensor, metadata map[string]string) (err error) {
	if path == "" {
		return &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	old, statErr := os.Stat(path)
	if statErr == nil && !old.Mode().IsRegular() {
		msg := "not a regular file"
		if old.IsDir() {
			msg = "is a directory"
		}
		return &fs.PathError{Op: "write", Path: path, Err: errors.New(msg)}
	}
	f, err := createTemp(path)
	if err != nil {
		// The temporary file's name means nothing to the caller, and
		// what kept it from being made (a missing directory, one that
		// may not be written) keeps path from being made too.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return &fs.PathError{Op: "open", Path: path, Err: pe.Err}
		}
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	if err := safetensors.Write(w, tensors, metadata); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if statErr == nil {
		if err := f.Chmod(old.Mode().Perm()); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// createTemp creates a new, empty file beside path, named after it, with
// the permissions os.Create gives (unlike os.CreateTemp's 0600, which a
// rename would leave on the final file).
func createTemp(path string) (*os.File, error) {
	dir, base := filepath.Split(path)
	var err error
	for range 100 {
		name := filepath.Join(dir, "."+base+".tmp"+strconv.FormatUint(rand.Uint64(), 36))
		var f *os.File
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, err
}

// Read reads the safetensors file path, checked as [safetensors.Read]
// checks it. An error opening the file is the *fs.PathError; an error
// reading it or in its contents (a file that is not valid safetensors)
// also matches vram.ErrArgument under errors.Is.
func Read(path string) (map[string]safetensors.Tensor, map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	tensors, meta, err := safetensors.Read(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, nil, badFile{err}
	}
	return tensors, meta, nil
}

// badFile is an error of a file that is not valid safetensors: err,
// matching vram.ErrArgument too.
type badFile struct{ err error }

func (e badFile) Error() string   { return e.err.Error() }
func (e badFile) Unwrap() []error { return []error{e.err, vram.ErrArgument} }
