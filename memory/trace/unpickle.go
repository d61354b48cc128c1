package trace

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/vramgo/vram/internal/pickle"
)

// This file is the unpickler of snapshots: package internal/pickle decodes
// the opcodes of plain data (None, bools, ints, floats, str, bytes, tuples,
// lists, dicts, sets) into the values below, and refuses everything that
// would construct a Python object (GLOBAL, REDUCE, BUILD, ...). Why not a
// general unpickler is said in the package documentation, "# PyTorch
// pickles".
//
// Decoded values are:
//
//	None            nil
//	bool            bool
//	int             int64, uint64 (above MaxInt64), or pyBigInt (larger)
//	float           float64
//	str             string
//	bytes           []byte
//	tuple           pyTuple
//	list, set       *pyList
//	dict            *pyDict
//
// The decoder never recurses, allocates only as input actually arrives (a
// length field cannot make it reserve memory the input does not contain),
// and counts the memory of the values it builds: past pickleFloorBytes it
// fails once they take more than pickleExpansion bytes per byte of input,
// so memory stays linear in the input size with a small constant, whatever
// the input. A slice grown by append (the stack, the MARKs, a list's items,
// a dict's keys and values) counts each backing array it moves to in full,
// as the heap holds the old one too until the collector frees it: values
// that cost nothing but their slot (None, small ints, DUP, memo GET) and
// one-at-a-time APPEND or SETITEM would otherwise take several times what
// is counted.

// pyList is a Python list (or set, whose order does not matter here).
type pyList struct {
	items  []any
	frames []Frame // the list converted as a call stack, once
	done   bool    // frames is set
}

// pyTuple is a Python tuple.
type pyTuple []any

// pyDict is a Python dict: keys and values alternate in kv, in insertion
// order; a later duplicate key wins.
type pyDict struct {
	kv    []any
	index map[string]int // string key -> position of its value; built for large dicts
	id    uint32         // 1 + the dict's number as a frame (see frameList); 0 if none
}

// pyBigInt stands for an integer that does not fit in 64 bits.
type pyBigInt = pickle.BigInt

// dictIndexMin is the number of keys from which get indexes a dict instead
// of scanning it: snapshot dicts have about ten keys, but a corrupt pickle
// may reference one huge dict from many places.
const dictIndexMin = 32

// len returns the number of entries.
func (d *pyDict) len() int { return len(d.kv) / 2 }

// get returns the value of the string key k.
func (d *pyDict) get(k string) (any, bool) {
	if d.len() >= dictIndexMin {
		if d.index == nil {
			d.index = make(map[string]int, d.len())
			for i := 0; i < len(d.kv); i += 2 {
				if s, ok := d.kv[i].(string); ok {
					d.index[s] = i + 1
				}
			}
		}
		i, ok := d.index[k]
		if !ok {
			return nil, false
		}
		return d.kv[i], true
	}
	for i := len(d.kv) - 2; i >= 0; i -= 2 {
		if s, ok := d.kv[i].(string); ok && s == k {
			return d.kv[i+1], true
		}
	}
	return nil, false
}

// setItems adds alternating keys and values; it may keep kv. It returns
// the bytes of a new backing array, 0 when it kept kv or had room.
func (d *pyDict) setItems(kv []any) int64 {
	var grown int64
	if d.kv == nil {
		d.kv = kv
	} else {
		c := cap(d.kv)
		d.kv = append(d.kv, kv...)
		grown = pickle.GrownBytes(c, cap(d.kv), sizeofAny)
	}
	d.index = nil // rebuilt on the next get
	return grown
}

// Pickle opcodes (Python's Lib/pickle.py names).
const (
	opMark           = pickle.OpMark
	opStop           = pickle.OpStop
	opPop            = pickle.OpPop
	opPopMark        = pickle.OpPopMark
	opDup            = pickle.OpDup
	opBinInt         = pickle.OpBinInt
	opBinInt1        = pickle.OpBinInt1
	opBinInt2        = pickle.OpBinInt2
	opNone           = pickle.OpNone
	opBinString      = pickle.OpBinString
	opShortBinString = pickle.OpShortBinString
	opBinUnicode     = pickle.OpBinUnicode
	opAppend         = pickle.OpAppend
	opDict           = pickle.OpDict
	opEmptyDict      = pickle.OpEmptyDict
	opAppends        = pickle.OpAppends
	opBinGet         = pickle.OpBinGet
	opLongBinGet     = pickle.OpLongBinGet
	opList           = pickle.OpList
	opEmptyList      = pickle.OpEmptyList
	opBinPut         = pickle.OpBinPut
	opLongBinPut     = pickle.OpLongBinPut
	opSetItem        = pickle.OpSetItem
	opTuple          = pickle.OpTuple
	opEmptyTuple     = pickle.OpEmptyTuple
	opSetItems       = pickle.OpSetItems
	opBinFloat       = pickle.OpBinFloat
	opProto          = pickle.OpProto
	opTuple1         = pickle.OpTuple1
	opTuple2         = pickle.OpTuple2
	opTuple3         = pickle.OpTuple3
	opNewTrue        = pickle.OpNewTrue
	opNewFalse       = pickle.OpNewFalse
	opLong1          = pickle.OpLong1
	opLong4          = pickle.OpLong4
	opBinBytes       = pickle.OpBinBytes
	opShortBinBytes  = pickle.OpShortBinBytes
	opShortBinUni    = pickle.OpShortBinUni
	opBinUnicode8    = pickle.OpBinUnicode8
	opBinBytes8      = pickle.OpBinBytes8
	opEmptySet       = pickle.OpEmptySet
	opAddItems       = pickle.OpAddItems
	opFrozenSet      = pickle.OpFrozenSet
	opMemoize        = pickle.OpMemoize
	opFrame          = pickle.OpFrame
	opByteArray8     = pickle.OpByteArray8
	opReadOnlyBuffer = pickle.OpReadOnlyBuffer
)

// memoChunk is the number of memo entries per chunk of the decoder's memo.
const memoChunk = pickle.MemoChunk

// unpickle decodes the pickle at the start of r. It returns the value and
// the number of bytes consumed. Errors are *ParseErrors with Kind KindPickle
// and the offset of the failing opcode.
func unpickle(r *bufio.Reader) (any, int64, error) {
	v, n, _, err := unpickleCounted(r)
	return v, n, err
}

// unpickleCounted is unpickle that also returns the memory the decoded
// values take, as the decoder counts it.
func unpickleCounted(r *bufio.Reader) (any, int64, int64, error) {
	b := &builder{}
	d := pickle.NewDecoder(r, b, pickle.Config{Buffers: true, Budget: pickleBudget})
	b.d = d
	v, err := d.Decode()
	if err != nil {
		err = pickleError(err)
	}
	return v, d.Offset(), d.Used(), err
}

// pickleError turns an error of the decoder into a *ParseError.
func pickleError(err error) error {
	switch e := err.(type) {
	case *ParseError:
		return e
	case *pickle.Error:
		var be *pickle.BudgetError
		var ue *pickle.UnsupportedError
		switch {
		case asErr(e.Err, &be):
			return &ParseError{Kind: KindPickle, Offset: e.Offset, Err: &LimitError{Limit: pickleExpansion, Pickle: true, Used: be.Used, Read: be.Read}}
		case asErr(e.Err, &ue):
			what := ue.What
			if ue.Class != "" {
				what = strings.Replace(what, "(a Python class or function)", "(the Python class or function "+ue.Class+")", 1)
			}
			return &ParseError{Kind: KindPickle, Offset: e.Offset, Msg: "pickle: unsupported opcode " + what +
				": only plain data (dicts, lists, tuples, numbers, strings) can be read" + classHint(ue.Class)}
		case e.Msg == "":
			return &ParseError{Kind: KindPickle, Offset: e.Offset, Err: e.Err}
		}
		return &ParseError{Kind: KindPickle, Offset: e.Offset, Msg: "pickle: " + e.Msg, Err: e.Err}
	}
	return &ParseError{Kind: KindPickle, Offset: -1, Err: err}
}

// asErr is errors.As for the decoder's own error types, which it never
// wraps further.
func asErr[T error](err error, target *T) bool {
	e, ok := err.(T)
	if ok {
		*target = e
	}
	return ok
}

// classHint says what a pickle holding class probably is, and what to save
// instead, for the classes users pickle by mistake.
func classHint(class string) string {
	switch class {
	case "collections.OrderedDict":
		return " (torch.cuda.memory_stats() returns an OrderedDict of counters, not a snapshot: save one with torch.cuda.memory._dump_snapshot(path))"
	case "torch._utils._rebuild_tensor_v2", "torch.storage._load_from_bytes":
		return " (a tensor: save the snapshot with torch.cuda.memory._dump_snapshot(path))"
	}
	return ""
}

// builder makes the containers of a snapshot pickle.
type builder struct{ d *pickle.Decoder }

// errorf returns a *ParseError at the opcode being executed.
func (b *builder) errorf(format string, args ...any) error {
	return &ParseError{Kind: KindPickle, Offset: b.d.OpOffset(), Msg: "pickle: " + fmt.Sprintf(format, args...)}
}

// Tuple implements pickle.Builder.
func (b *builder) Tuple(items []any) (any, int64) { return pyTuple(items), sizeofSlice }

// List implements pickle.Builder.
func (b *builder) List(items []any) (any, int64) { return &pyList{items: items}, sizeofList }

// Dict implements pickle.Builder.
func (b *builder) Dict(kv []any) (any, int64, error) { return &pyDict{kv: kv}, sizeofDict, nil }

// Append implements pickle.Builder.
func (b *builder) Append(op byte, v any, items []any, keep bool) (int64, error) {
	l, ok := v.(*pyList)
	if !ok {
		name := "APPENDS"
		if op == opAppend {
			name = "APPEND"
		}
		return 0, b.errorf("%s to %s, not a list", name, aPyType(v))
	}
	if keep && l.items == nil {
		l.items = items
		return 0, nil
	}
	c := cap(l.items)
	l.items = append(l.items, items...)
	return pickle.GrownBytes(c, cap(l.items), sizeofAny), nil
}

// SetItems implements pickle.Builder.
func (b *builder) SetItems(op byte, v any, kv []any, keep bool) (int64, error) {
	d, ok := v.(*pyDict)
	if !ok {
		name := "SETITEMS"
		if op == opSetItem {
			name = "SETITEM"
		}
		return 0, b.errorf("%s on %s, not a dict", name, aPyType(v))
	}
	if !keep {
		c := cap(d.kv)
		d.kv = append(d.kv, kv...)
		d.index = nil
		return pickle.GrownBytes(c, cap(d.kv), sizeofAny), nil
	}
	return d.setItems(kv), nil
}

// TypeName implements pickle.Builder.
func (b *builder) TypeName(v any) string { return pyTypeName(v) }

// aPyType names the Python type of a decoded value after an article, for
// messages: "an int", "a str", "None".
func aPyType(v any) string {
	name := pyTypeName(v)
	switch {
	case name == "None":
		return name
	case strings.ContainsRune("aeiou", rune(name[0])):
		return "an " + name
	}
	return "a " + name
}

// pyTypeName names the Python type of a decoded value, for messages.
func pyTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64, uint64, pyBigInt:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []byte:
		return "bytes"
	case pyTuple:
		return "tuple"
	case *pyList:
		return "list"
	case *pyDict:
		return "dict"
	}
	return fmt.Sprintf("%T", v)
}
