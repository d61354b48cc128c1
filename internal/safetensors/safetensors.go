// Package safetensors reads and writes the safetensors file format used by
// Hugging Face and PyTorch to store named tensors.
//
// A file is an 8-byte little-endian unsigned header length N, then N bytes of
// a JSON object mapping each tensor name to
//
//	{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
//
// (offsets in bytes, relative to the start of the data section) and
// optionally "__metadata__" to an object of string values, then the data
// section: the raw little-endian elements of every tensor, row-major.
//
// The format is small enough that this package is hand-written rather
// than taken from a third-party library; [Read] scans the JSON header
// itself, which encoding/json reads several times slower and with
// gigabytes of garbage for a header of millions of records. [Read]
// validates everything it reads (header size, JSON shape, dtypes, shapes,
// offsets, sizes, overlaps and gaps) so that a corrupt or hostile file gives
// an error, never a panic or a huge allocation out of proportion to the
// input.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Tensor is one named tensor of a file: its dtype name as the format spells
// it ("F32", "BF16", "I64", "BOOL", ...), its shape (empty for a scalar) and
// its raw little-endian row-major bytes.
type Tensor struct {
	DType string
	Shape []int
	Data  []byte
}

// MaxHeaderSize is the largest JSON header, in bytes, that [Read] accepts
// (100 MiB, like the reference implementation).
const MaxHeaderSize = 100 << 20

// metadataKey is the reserved header key holding the free-form metadata.
const metadataKey = "__metadata__"

// dtypeBits is the size in bits of one element of each dtype the format
// defines: the reference's list, with the complex numbers and the 8-, 6-
// and 4-bit floats of quantized models, which no vram dtype reads but
// which a file of other tensors may hold.
var dtypeBits = map[string]int{
	"BOOL":        8,
	"F4":          4,
	"F6_E2M3":     6,
	"F6_E3M2":     6,
	"U8":          8,
	"I8":          8,
	"F8_E5M2":     8,
	"F8_E4M3":     8,
	"F8_E8M0":     8,
	"F8_E4M3FNUZ": 8,
	"F8_E5M2FNUZ": 8,
	"I16":         16,
	"U16":         16,
	"F16":         16,
	"BF16":        16,
	"I32":         32,
	"U32":         32,
	"F32":         32,
	"C64":         64,
	"I64":         64,
	"U64":         64,
	"F64":         64,
}

// DTypeBits returns the size in bits of one element of the named dtype
// ("F32" is 32, "F4" 4) and whether the name is one the format defines.
func DTypeBits(dtype string) (int, bool) {
	n, ok := dtypeBits[dtype]
	return n, ok
}

// errorf returns an error whose message starts with "safetensors: ". The
// strings and shapes among args, which come from the file and may be
// megabytes long, are cut short.
func errorf(format string, args ...any) error {
	for i, a := range args {
		switch a := a.(type) {
		case string:
			args[i] = Cut(a)
		case []int:
			args[i] = ShapeString(a)
		case []int64:
			args[i] = ShapeString(a)
		}
	}
	return fmt.Errorf("safetensors: "+format, args...)
}

// maxShown is the most bytes of a name, and of dimensions of a shape, an
// error shows.
const maxShown = 200

// Cut returns s, a name or value read from a file, for a message: s
// itself, or its first 200 bytes or so, whole characters, and how many
// bytes it has, as a file may hold names megabytes long.
func Cut(s string) string {
	if len(s) <= maxShown {
		return s
	}
	n := maxShown
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "... (" + strconv.Itoa(len(s)) + " bytes)"
}

// ShapeString formats a shape read from a file for a message, as PyTorch
// prints a size ("[2, 3]"), listing at most 20 dimensions and counting the
// others.
func ShapeString[T int | int64](shape []T) string {
	const most = maxShown / 10
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape[:min(len(shape), most)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(int64(d), 10))
	}
	if len(shape) > most {
		fmt.Fprintf(&b, ", ... (%d dimensions)", len(shape))
	}
	b.WriteByte(']')
	return b.String()
}

// byteSize returns the number of data bytes a tensor of this dtype and
// shape holds, or an error for an unknown dtype, a negative dimension, a
// size that overflows int64 or, for a dtype of fewer bits than a byte,
// elements that do not fill whole bytes.
func byteSize(name, dtype string, shape []int) (int64, error) {
	bits, ok := dtypeBits[dtype]
	if !ok {
		return 0, errorf("tensor %q: unknown dtype %q", name, dtype)
	}
	n := int64(1) // elements
	for _, d := range shape {
		if d < 0 {
			return 0, errorf("tensor %q: negative dimension in shape %v", name, shape)
		}
		if d == 0 {
			n = 0
			continue
		}
		if n > math.MaxInt64/int64(d) {
			return 0, errorf("tensor %q: shape %v is too large", name, shape)
		}
		n *= int64(d)
	}
	if bits%8 == 0 {
		if n > math.MaxInt64/int64(bits/8) {
			return 0, errorf("tensor %q: shape %v is too large", name, shape)
		}
		return n * int64(bits/8), nil
	}
	if n > math.MaxInt64/int64(bits) {
		return 0, errorf("tensor %q: shape %v is too large", name, shape)
	}
	if n*int64(bits)%8 != 0 {
		return 0, errorf("tensor %q: %d elements of %s take %d bits, not a whole number of bytes", name, n, dtype, n*int64(bits))
	}
	return n * int64(bits) / 8, nil
}

// checkName rejects names the format cannot hold.
func checkName(name string) error {
	switch {
	case name == "":
		return errorf("empty tensor name")
	case name == metadataKey:
		return errorf("tensor name %q is reserved for metadata", name)
	case !utf8.ValidString(name):
		return errorf("tensor name %q is not valid UTF-8", name)
	}
	return nil
}

// Write writes tensors and metadata (which may be nil) to w in the
// safetensors format. Tensors are laid out in the data section with
// contiguous offsets, those of larger elements first and then by name, as
// the reference writer orders them, and the header is padded with spaces
// to a multiple of 8 bytes, so that every tensor starts at a multiple of
// its element size in the file: readers that view the file's bytes in
// place (a memory map) need that. It returns
// an error, before writing anything, for an empty or reserved name, an
// unknown dtype, a negative dimension or data whose length does not match
// the dtype and shape.
func Write(w io.Writer, tensors map[string]Tensor, metadata map[string]string) error {
	names := make([]string, 0, len(tensors))
	for name := range tensors {
		names = append(names, name)
	}
	// Element sizes of a byte or more are powers of two: after all
	// tensors of larger elements, the offset is a multiple of the next
	// size.
	sort.Slice(names, func(i, j int) bool {
		si, sj := dtypeBits[tensors[names[i]].DType], dtypeBits[tensors[names[j]].DType]
		if si != sj {
			return si > sj
		}
		return names[i] < names[j]
	})

	var hdr bytes.Buffer
	hdr.WriteByte('{')
	first := true
	comma := func() {
		if !first {
			hdr.WriteByte(',')
		}
		first = false
	}
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k, v := range metadata {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return errorf("metadata %q is not valid UTF-8", k)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		comma()
		writeJSONString(&hdr, metadataKey)
		hdr.WriteString(":{")
		for i, k := range keys {
			if i > 0 {
				hdr.WriteByte(',')
			}
			writeJSONString(&hdr, k)
			hdr.WriteByte(':')
			writeJSONString(&hdr, metadata[k])
		}
		hdr.WriteByte('}')
	}
	var offset int64
	for _, name := range names {
		t := tensors[name]
		if err := checkName(name); err != nil {
			return err
		}
		n, err := byteSize(name, t.DType, t.Shape)
		if err != nil {
			return err
		}
		if int64(len(t.Data)) != n {
			return errorf("tensor %q: %s %v needs %d bytes of data, got %d", name, t.DType, t.Shape, n, len(t.Data))
		}
		comma()
		writeJSONString(&hdr, name)
		hdr.WriteString(`:{"dtype":`)
		writeJSONString(&hdr, t.DType)
		hdr.WriteString(`,"shape":[`)
		for i, d := range t.Shape {
			if i > 0 {
				hdr.WriteByte(',')
			}
			hdr.WriteString(strconv.Itoa(d))
		}
		hdr.WriteString(`],"data_offsets":[`)
		hdr.WriteString(strconv.FormatInt(offset, 10))
		hdr.WriteByte(',')
		hdr.WriteString(strconv.FormatInt(offset+n, 10))
		hdr.WriteString("]}")
		offset += n
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	if hdr.Len() > MaxHeaderSize {
		return errorf("header of %d bytes exceeds the limit of %d", hdr.Len(), MaxHeaderSize)
	}

	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], uint64(hdr.Len()))
	if _, err := w.Write(prefix[:]); err != nil {
		return errorf("writing header: %w", err)
	}
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return errorf("writing header: %w", err)
	}
	for _, name := range names {
		if _, err := w.Write(tensors[name].Data); err != nil {
			return errorf("writing tensor %q: %w", name, err)
		}
	}
	return nil
}

// writeJSONString writes s as a JSON string literal.
func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a valid UTF-8 string always marshals
	b.Write(enc)
}

// located is a validated header record.
type located struct {
	name       string
	dtype      string
	shape      []int
	begin, end int64
}

// Read reads a safetensors file from r and returns its tensors by name and
// its metadata (nil when the file has none). It reads r to its end: the
// data section must end exactly where the last tensor does. The Data of the
// returned tensors are slices of one buffer, capped so that appending to one
// never overwrites another.
//
// Read returns an error, prefixed "safetensors: ", for a truncated file, a
// header larger than [MaxHeaderSize], a header that is not a JSON object of
// the expected form (including duplicate names, a member of a tensor's
// record or of the metadata given twice, and unknown fields, member names
// being case-sensitive), an
// unknown dtype, a negative dimension, offsets that do not match the size
// implied by dtype and shape, and tensors whose data overlap, leave gaps or
// fall outside the data section.
func Read(r io.Reader) (map[string]Tensor, map[string]string, error) {
	var prefix [8]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, nil, errorf("reading header length: %w", eofAsUnexpected(err))
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	if n > MaxHeaderSize {
		return nil, nil, errorf("header length %d exceeds the limit of %d bytes", n, MaxHeaderSize)
	}
	if n < 2 {
		return nil, nil, errorf("header length %d is too small for a JSON object", n)
	}
	hdr := make([]byte, 0, min(n, 1<<20))
	hdr, err := readN(r, hdr, int64(n))
	if err != nil {
		return nil, nil, errorf("reading %d-byte header: %w", n, err)
	}
	entries, metadata, err := parseHeader(hdr)
	if err != nil {
		return nil, nil, err
	}

	// The data section must be covered exactly: sorted by position, each
	// tensor starts where the previous one ended.
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].begin != entries[j].begin {
			return entries[i].begin < entries[j].begin
		}
		if entries[i].end != entries[j].end {
			return entries[i].end < entries[j].end
		}
		return entries[i].name < entries[j].name
	})
	var pos int64
	var prev string
	for _, e := range entries {
		switch {
		case e.begin < pos:
			return nil, nil, errorf("tensor %q (bytes %d-%d) overlaps tensor %q (ending at %d)", e.name, e.begin, e.end, prev, pos)
		case e.begin > pos:
			return nil, nil, errorf("gap in the data section: bytes %d-%d belong to no tensor (before tensor %q)", pos, e.begin, e.name)
		}
		pos, prev = e.end, e.name
	}

	data, err := readN(r, nil, pos)
	if err != nil {
		return nil, nil, errorf("reading %d bytes of tensor data: %w", pos, err)
	}
	var extra [1]byte
	if k, _ := io.ReadFull(r, extra[:]); k > 0 {
		return nil, nil, errorf("trailing bytes after the %d-byte data section", pos)
	}

	out := make(map[string]Tensor, len(entries))
	for _, e := range entries {
		out[e.name] = Tensor{DType: e.dtype, Shape: e.shape, Data: data[e.begin:e.end:e.end]}
	}
	return out, metadata, nil
}

// readN appends exactly n bytes from r to buf. It grows the buffer as bytes
// arrive rather than trusting n, so a header that claims a huge size costs
// no more memory than the input really has, doubling it each time, so
// that the buffers it drops add up to no more than what it keeps.
func readN(r io.Reader, buf []byte, n int64) ([]byte, error) {
	start := len(buf)
	for got := int64(0); got < n; got = int64(len(buf) - start) {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(n-got, max(got, 1<<20))))
		}
		room := int(min(int64(cap(buf)-len(buf)), n-got))
		k, err := io.ReadFull(r, buf[len(buf):len(buf)+room])
		buf = buf[:len(buf)+k]
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("file truncated: got %d of %d bytes", len(buf)-start, n)
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

func eofAsUnexpected(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("file truncated")
	}
	return err
}
