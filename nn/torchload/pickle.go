package torchload

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	ipickle "github.com/vramgo/vram/internal/pickle"
)

// This file decodes the pickle of a torch.save archive (data.pkl). Package
// internal/pickle decodes the opcodes of protocols 2 to 5; this file makes
// the containers and resolves a class or function only from the allowlist in
// [allowed]: calling one builds a Go value (a dict, a tensor reference),
// never runs anything. Any other global, and every opcode that would build
// an arbitrary object, is an error naming it.
//
// The decoder never recurses. The whole pickle is in memory (its size is
// bounded by [Options.MaxPickleBytes]), every opcode reads at least one
// byte of it and builds values of bounded size, so memory stays linear in
// the pickle's size; the memo and the MARK stack are bounded too.

// Decoded values are nil (None), bool, int64, bigInt, float64, string,
// []byte, tuple, *list, *dict, global, *storage, *tensorRef and dtypeName.

// tuple is a Python tuple.
type tuple []any

// list is a Python list or set.
type list struct{ items []any }

// dict is a Python dict or OrderedDict, in insertion order.
type dict struct {
	keys, vals []any
	index      map[any]int // hashable key -> position
}

// bigInt is an integer that does not fit in 64 bits.
type bigInt = ipickle.BigInt

// global is a class or function of the allowlist, named by a GLOBAL or
// STACK_GLOBAL opcode.
type global struct{ module, name string }

func (g global) String() string { return g.module + "." + g.name }

// dtypeName is a torch.dtype, such as torch.float32, by its element type
// name ("float32").
type dtypeName string

// storage is a persistent id of the archive: one of its data/<key> entries.
type storage struct {
	key   string
	dtype elemType // the element type of the storage class
	numel int64    // its size, in elements of dtype
}

// tensorRef is a tensor rebuilt by torch._utils._rebuild_tensor_v2 (or v3,
// or _rebuild_parameter): a view of a storage, read only when selected.
type tensorRef struct {
	st     *storage
	dtype  elemType // the tensor's, the storage's but for untyped storages
	offset int64    // in elements
	size   []int64
	stride []int64
}

// get returns the value of key k (a string or an int64), and whether d has it.
func (d *dict) get(k any) (any, bool) {
	if d.index == nil {
		return nil, false
	}
	i, ok := d.index[k]
	if !ok {
		return nil, false
	}
	return d.vals[i], true
}

// set sets key k to v: a later duplicate replaces the earlier value, as
// in Python.
func (d *dict) set(k, v any) {
	if hashable(k) {
		if i, ok := d.index[k]; ok {
			d.vals[i] = v
			return
		}
		if d.index == nil {
			d.index = map[any]int{}
		}
		d.index[k] = len(d.keys)
	}
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
}

// hashable reports whether k can be a key of a Go map with Python's
// equality for the types that state dicts use as keys.
func hashable(k any) bool {
	switch k.(type) {
	case string, int64, bool, nil:
		return true
	}
	return false
}

// Pickle opcodes (the names of Python's Lib/pickle.py).
const (
	opMark           = ipickle.OpMark
	opStop           = ipickle.OpStop
	opPop            = ipickle.OpPop
	opPopMark        = ipickle.OpPopMark
	opDup            = ipickle.OpDup
	opBinInt         = ipickle.OpBinInt
	opBinInt1        = ipickle.OpBinInt1
	opBinInt2        = ipickle.OpBinInt2
	opNone           = ipickle.OpNone
	opBinPersID      = ipickle.OpBinPersID
	opReduce         = ipickle.OpReduce
	opBinString      = ipickle.OpBinString
	opShortBinString = ipickle.OpShortBinString
	opBinUnicode     = ipickle.OpBinUnicode
	opAppend         = ipickle.OpAppend
	opBuild          = ipickle.OpBuild
	opGlobal         = ipickle.OpGlobal
	opDict           = ipickle.OpDict
	opEmptyDict      = ipickle.OpEmptyDict
	opAppends        = ipickle.OpAppends
	opBinGet         = ipickle.OpBinGet
	opLongBinGet     = ipickle.OpLongBinGet
	opList           = ipickle.OpList
	opEmptyList      = ipickle.OpEmptyList
	opBinPut         = ipickle.OpBinPut
	opLongBinPut     = ipickle.OpLongBinPut
	opSetItem        = ipickle.OpSetItem
	opTuple          = ipickle.OpTuple
	opEmptyTuple     = ipickle.OpEmptyTuple
	opSetItems       = ipickle.OpSetItems
	opBinFloat       = ipickle.OpBinFloat
	opBinBytes       = ipickle.OpBinBytes
	opShortBinBytes  = ipickle.OpShortBinBytes
	opProto          = ipickle.OpProto
	opNewObj         = ipickle.OpNewObj
	opTuple1         = ipickle.OpTuple1
	opTuple2         = ipickle.OpTuple2
	opTuple3         = ipickle.OpTuple3
	opNewTrue        = ipickle.OpNewTrue
	opNewFalse       = ipickle.OpNewFalse
	opLong1          = ipickle.OpLong1
	opLong4          = ipickle.OpLong4
	opShortBinUni    = ipickle.OpShortBinUni
	opBinUnicode8    = ipickle.OpBinUnicode8
	opBinBytes8      = ipickle.OpBinBytes8
	opEmptySet       = ipickle.OpEmptySet
	opAddItems       = ipickle.OpAddItems
	opFrozenSet      = ipickle.OpFrozenSet
	opStackGlobal    = ipickle.OpStackGlobal
	opMemoize        = ipickle.OpMemoize
	opFrame          = ipickle.OpFrame
)

// Bounds of the decoder.
const (
	// maxMemo is the largest memo index accepted: a pickle of
	// MaxPickleBytes cannot memoize more values than it has bytes.
	maxMemo = 1 << 26
	// maxMarks is the deepest nesting of MARKs (containers being built).
	maxMarks = 1000
	// maxDims is the most dimensions a tensor may have (PyTorch's limit
	// is 64 for most kernels; state dicts use at most 5 or so).
	maxDims = 64
	// maxLine bounds the module and name of a GLOBAL opcode, and the
	// strings of messages.
	maxLine = ipickle.MaxLine
)

// decoder resolves the objects of one pickle and makes its containers,
// for the opcode decoder pd (package internal/pickle).
type decoder struct {
	pd       *ipickle.Decoder
	base     int64 // the offset of the pickle in the data holding it
	storages map[string]*storage
	legacy   bool // persistent ids of the legacy format, with view metadata
}

// unpickle decodes the pickle data, resolving persistent ids through
// storages (the keys of the archive's data/ entries).
func unpickle(data []byte) (any, error) {
	v, _, err := unpickleAt(data, 0, map[string]*storage{}, false)
	return v, err
}

// unpickleAt decodes the pickle at data[pos:], one of several in a row,
// with persistent ids resolved through storages (shared by the pickles of
// a file): those of the legacy format when legacy is set. It returns the
// value and the offset just past the pickle's STOP.
func unpickleAt(data []byte, pos int, storages map[string]*storage, legacy bool) (any, int, error) {
	d := &decoder{base: int64(pos), storages: storages, legacy: legacy}
	d.pd = ipickle.NewDecoder(bufio.NewReader(bytes.NewReader(data[pos:])), d, ipickle.Config{
		MinProto: 2, SingleValue: true, NoUint64: true, StrictUTF8: true, MaxMarks: maxMarks, MaxMemo: maxMemo,
		Size: int64(len(data) - pos), Objects: d,
	})
	v, err := d.pd.Decode()
	if pe, ok := err.(*ipickle.Error); ok {
		err = formatErr("data.pkl offset %d: %s", d.base+pe.Offset, pe.Error())
		if ue, ok := pe.Err.(*ipickle.UnsupportedError); ok {
			err = formatErr("data.pkl offset %d: opcode %s is not allowed in a state dict", d.base+pe.Offset, ue.What)
		}
	}
	return v, pos + int(d.pd.Offset()), err
}

// opPos returns the offset of the opcode being decoded, in the data
// holding the pickle.
func (d *decoder) opPos() int64 { return d.base + d.pd.OpOffset() }

// errorf returns an error at the offset of the current opcode, matching
// vram.ErrArgument.
func (d *decoder) errorf(format string, args ...any) error {
	return formatErr("data.pkl offset %d: "+format, append([]any{d.opPos()}, args...)...)
}

// Tuple implements pickle.Builder.
func (d *decoder) Tuple(items []any) (any, int64) { return tuple(items), ipickle.SizeofSlice }

// List implements pickle.Builder.
func (d *decoder) List(items []any) (any, int64) { return &list{items: items}, 0 }

// Dict implements pickle.Builder.
func (d *decoder) Dict(kv []any) (any, int64, error) {
	m := &dict{}
	for i := 0; i < len(kv); i += 2 {
		m.set(kv[i], kv[i+1])
	}
	return m, 0, nil
}

// Append implements pickle.Builder.
func (d *decoder) Append(op byte, v any, items []any, keep bool) (int64, error) {
	l, ok := v.(*list)
	if !ok {
		name := "APPENDS"
		if op == opAppend {
			name = "APPEND"
		}
		return 0, d.errorf("%s to a %s", name, typeName(v))
	}
	l.items = append(l.items, items...)
	return 0, nil
}

// SetItems implements pickle.Builder.
func (d *decoder) SetItems(op byte, v any, kv []any, keep bool) (int64, error) {
	m, ok := v.(*dict)
	if !ok {
		return 0, d.errorf("SETITEM on a %s", typeName(v))
	}
	for i := 0; i < len(kv); i += 2 {
		m.set(kv[i], kv[i+1])
	}
	return 0, nil
}

// TypeName implements pickle.Builder.
func (d *decoder) TypeName(v any) string { return typeName(v) }

// Global implements pickle.Objects.
func (d *decoder) Global(module, name string) (any, error) { return d.global(module, name) }

// Reduce implements pickle.Objects.
func (d *decoder) Reduce(fn, args any) (any, error) { return d.call(fn, args) }

// Build implements pickle.Objects.
func (d *decoder) Build(obj, state any) error {
	switch obj.(type) {
	case *dict, *tensorRef:
		// The attributes of an OrderedDict (a state dict's _metadata)
		// or of a Parameter: not needed.
		return nil
	}
	return d.errorf("BUILD of a %s", typeName(obj))
}

// Persistent implements pickle.Objects.
func (d *decoder) Persistent(pid any) (any, error) { return d.persistent(pid) }

// printable cuts s to maxLine bytes and replaces control characters, for
// messages.
func printable(s string) string {
	if len(s) > maxLine {
		s = s[:maxLine]
	}
	s = strings.ToValidUTF8(s, "?")
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == utf8.RuneError {
			return '?'
		}
		return r
	}, s)
}

// typeName names the Python type of a decoded value, for messages.
func typeName(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64, bigInt:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []byte:
		return "bytes"
	case tuple:
		return "tuple"
	case *list:
		return "list"
	case *dict:
		return "dict"
	case global:
		return v.String()
	case dtypeName:
		return "torch.dtype"
	case *storage:
		return "storage"
	case *tensorRef:
		return "tensor"
	}
	return fmt.Sprintf("%T", v)
}
