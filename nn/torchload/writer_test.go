package torchload

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
)

// This file writes torch.save archives for the tests, opcode by opcode as
// PyTorch's pickler (protocol 2) does.

// pw writes pickle opcodes.
type pw struct {
	bytes.Buffer
	memo   int
	legacy bool // persistent ids of the legacy format
}

func (w *pw) op(b ...byte) *pw { w.Write(b); return w }

func (w *pw) put() *pw {
	if w.memo < 256 {
		w.op(opBinPut, byte(w.memo))
	} else {
		w.op(opLongBinPut)
		binary.Write(w, binary.LittleEndian, uint32(w.memo))
	}
	w.memo++
	return w
}

func (w *pw) global(module, name string) *pw {
	w.op(opGlobal)
	w.WriteString(module + "\n" + name + "\n")
	return w.put()
}

func (w *pw) str(s string) *pw {
	w.op(opBinUnicode)
	binary.Write(w, binary.LittleEndian, uint32(len(s)))
	w.WriteString(s)
	return w.put()
}

func (w *pw) int(n int64) *pw {
	switch {
	case n >= 0 && n < 256:
		w.op(opBinInt1, byte(n))
	case n >= 0 && n < 65536:
		w.op(opBinInt2)
		binary.Write(w, binary.LittleEndian, uint16(n))
	case n >= math.MinInt32 && n <= math.MaxInt32:
		w.op(opBinInt)
		binary.Write(w, binary.LittleEndian, int32(n))
	default:
		w.op(opLong1, 8)
		binary.Write(w, binary.LittleEndian, n)
	}
	return w
}

// The values the test writer pickles, beside nil, bool, int, int64,
// float64, string, []any (a list) and tup (a tuple).
type (
	tup   []any
	odict []kv // a collections.OrderedDict
	pdict []kv // a plain dict
	kv    struct {
		k any
		v any
	}
	// glob is the global module.name itself.
	glob struct{ module, name string }
	// call is module.name(args...), pickled with REDUCE.
	call struct {
		module, name string
		args         tup
	}
	// tens is a tensor of storage key of class class ("FloatStorage"),
	// of numel elements.
	tens struct {
		key    string
		class  string
		numel  int64
		offset int64
		size   []int64
		stride []int64
		param  bool   // saved as an nn.Parameter
		v3     string // dtype name for _rebuild_tensor_v3 (untyped storage)
		// quant holds the quantizer parameters of a quantized tensor,
		// written with _rebuild_qtensor.
		quant tup
	}
)

func (w *pw) value(v any) {
	switch v := v.(type) {
	case nil:
		w.op(opNone)
	case bool:
		if v {
			w.op(opNewTrue)
		} else {
			w.op(opNewFalse)
		}
	case int:
		w.int(int64(v))
	case int64:
		w.int(v)
	case float64:
		w.op(opBinFloat)
		binary.Write(w, binary.BigEndian, math.Float64bits(v))
	case string:
		w.str(v)
	case tup:
		w.op(opMark)
		for _, x := range v {
			w.value(x)
		}
		w.op(opTuple).put()
	case []any:
		w.op(opEmptyList).put()
		if len(v) > 0 {
			w.op(opMark)
			for _, x := range v {
				w.value(x)
			}
			w.op(opAppends)
		}
	case odict:
		w.global("collections", "OrderedDict")
		w.op(opEmptyTuple, opReduce).put()
		w.items(v)
	case pdict:
		w.op(opEmptyDict).put()
		w.items(v)
	case tens:
		w.tensor(v)
	case call:
		w.global(v.module, v.name)
		w.value(v.args)
		w.op(opReduce).put()
	case glob:
		w.global(v.module, v.name)
	default:
		panic(fmt.Sprintf("test writer: %T", v))
	}
}

func (w *pw) items(v []kv) {
	if len(v) == 0 {
		return
	}
	w.op(opMark)
	for _, e := range v {
		w.value(e.k)
		w.value(e.v)
	}
	w.op(opSetItems)
}

func (w *pw) tensor(t tens) {
	if t.param {
		w.global("torch._utils", "_rebuild_parameter")
		w.op(opMark)
	}
	switch {
	case t.quant != nil:
		w.global("torch._utils", "_rebuild_qtensor")
	case t.v3 != "":
		w.global("torch._utils", "_rebuild_tensor_v3")
	default:
		w.global("torch._utils", "_rebuild_tensor_v2")
	}
	w.op(opMark)
	// The persistent id.
	w.op(opMark)
	w.str("storage")
	w.global("torch", t.class)
	w.str(t.key)
	w.str("cpu")
	w.int(t.numel)
	if w.legacy {
		w.op(opNone)
	}
	w.op(opTuple).put()
	w.op(opBinPersID)
	w.int(t.offset)
	w.value(toTup(t.size))
	w.value(toTup(t.stride))
	if t.quant != nil {
		w.value(t.quant)
	}
	w.op(opNewFalse)
	w.global("collections", "OrderedDict")
	w.op(opEmptyTuple, opReduce).put()
	if t.v3 != "" {
		w.global("torch", t.v3)
	}
	w.op(opTuple).put()
	w.op(opReduce).put()
	if t.param {
		w.op(opNewTrue)
		w.global("collections", "OrderedDict")
		w.op(opEmptyTuple, opReduce).put()
		w.op(opTuple).put()
		w.op(opReduce).put()
	}
}

func toTup(s []int64) tup {
	t := make(tup, len(s))
	for i, x := range s {
		t[i] = x
	}
	return t
}

// pickle returns the protocol 2 pickle of v.
func pickle(v any) []byte {
	w := &pw{}
	w.op(opProto, 2)
	w.value(v)
	w.op(opStop)
	return w.Bytes()
}

// record is one entry of a test archive.
type record struct {
	name   string
	data   []byte
	method uint16 // zip.Store unless set
}

// archiveOf returns a torch.save zip archive with data.pkl holding the
// pickle of root, and storages by key.
func archiveOf(t testing.TB, root any, storages map[string][]byte) []byte {
	recs := []record{{name: "archive/data.pkl", data: pickle(root)}, {name: "archive/byteorder", data: []byte("little")}}
	for _, k := range slices.Sorted(maps.Keys(storages)) {
		recs = append(recs, record{name: "archive/data/" + k, data: storages[k]})
	}
	recs = append(recs, record{name: "archive/version", data: []byte("3\n")})
	return zipOf(t, recs)
}

func zipOf(t testing.TB, recs []record) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, r := range recs {
		f, err := zw.CreateHeader(&zip.FileHeader{Name: r.name, Method: r.method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(r.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// le returns the little-endian bytes of vals.
func le(vals any) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, vals)
	return b.Bytes()
}

// f32 is a contiguous float32 tensor of storage key holding n elements.
func f32(key string, size ...int64) tens {
	n := int64(1)
	for _, s := range size {
		n *= s
	}
	return tens{key: key, class: "FloatStorage", numel: n, size: size, stride: contiguous(size)}
}

func contiguous(size []int64) []int64 {
	st := make([]int64, len(size))
	acc := int64(1)
	for i := len(size) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= size[i]
	}
	return st
}

// seq returns n float32 values 0, 1, ..., n-1.
func seq(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)
	}
	return v
}

// legacyOf returns a file of the legacy torch.save format holding root,
// with storages by key of the given element sizes.
func legacyOf(root any, storages map[string][]byte, elemSize map[string]int) []byte {
	var b bytes.Buffer
	b.WriteString(legacyMagic)
	b.Write(pickle(1001))
	b.Write(pickle(pdict{{"protocol_version", 1001}, {"little_endian", true}, {"type_sizes", pdict{{"short", 2}, {"int", 4}, {"long", 4}}}}))
	w := &pw{legacy: true}
	w.op(opProto, 2)
	w.value(root)
	w.op(opStop)
	b.Write(w.Bytes())
	keys := slices.Sorted(maps.Keys(storages))
	list := make([]any, len(keys))
	for i, k := range keys {
		list[i] = k
	}
	b.Write(pickle(list))
	for _, k := range keys {
		binary.Write(&b, binary.LittleEndian, int64(len(storages[k])/elemSize[k]))
		b.Write(storages[k])
	}
	return b.Bytes()
}
