package torchload

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// This file decodes the pickle of a torch.save archive (data.pkl). It
// implements the opcodes of protocols 2 to 5 that plain data and tensors
// need, and resolves a class or function only from the allowlist in
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
type bigInt struct{}

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
	opMark           = '('
	opStop           = '.'
	opPop            = '0'
	opPopMark        = '1'
	opDup            = '2'
	opBinInt         = 'J'
	opBinInt1        = 'K'
	opBinInt2        = 'M'
	opNone           = 'N'
	opBinPersID      = 'Q'
	opReduce         = 'R'
	opBinString      = 'T'
	opShortBinString = 'U'
	opBinUnicode     = 'X'
	opAppend         = 'a'
	opBuild          = 'b'
	opGlobal         = 'c'
	opDict           = 'd'
	opEmptyDict      = '}'
	opAppends        = 'e'
	opBinGet         = 'h'
	opLongBinGet     = 'j'
	opList           = 'l'
	opEmptyList      = ']'
	opBinPut         = 'q'
	opLongBinPut     = 'r'
	opSetItem        = 's'
	opTuple          = 't'
	opEmptyTuple     = ')'
	opSetItems       = 'u'
	opBinFloat       = 'G'
	opBinBytes       = 'B'
	opShortBinBytes  = 'C'
	opProto          = 0x80
	opNewObj         = 0x81
	opTuple1         = 0x85
	opTuple2         = 0x86
	opTuple3         = 0x87
	opNewTrue        = 0x88
	opNewFalse       = 0x89
	opLong1          = 0x8a
	opLong4          = 0x8b
	opShortBinUni    = 0x8c
	opBinUnicode8    = 0x8d
	opBinBytes8      = 0x8e
	opEmptySet       = 0x8f
	opAddItems       = 0x90
	opFrozenSet      = 0x91
	opStackGlobal    = 0x93
	opMemoize        = 0x94
	opFrame          = 0x95
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
)

// decoder decodes one pickle held in memory.
type decoder struct {
	data     []byte
	pos      int
	opPos    int // offset of the opcode being decoded
	stack    []any
	marks    []int
	memo     map[uint32]any
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
	d := &decoder{data: data, pos: pos, memo: map[uint32]any{}, storages: storages, legacy: legacy}
	v, err := d.run()
	return v, d.pos, err
}

// errorf returns an error at the offset of the current opcode, matching
// vram.ErrArgument.
func (d *decoder) errorf(format string, args ...any) error {
	return formatErr("data.pkl offset %d: "+format, append([]any{d.opPos}, args...)...)
}

func (d *decoder) read(n int) ([]byte, error) {
	if n < 0 || n > len(d.data)-d.pos {
		return nil, d.errorf("pickle ends early (truncated file?)")
	}
	b := d.data[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

func (d *decoder) floor() int {
	if len(d.marks) == 0 {
		return 0
	}
	return d.marks[len(d.marks)-1]
}

func (d *decoder) pop() (any, error) {
	if len(d.stack) <= d.floor() {
		return nil, d.errorf("stack empty")
	}
	v := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	return v, nil
}

func (d *decoder) top() (any, error) {
	if len(d.stack) <= d.floor() {
		return nil, d.errorf("stack empty")
	}
	return d.stack[len(d.stack)-1], nil
}

func (d *decoder) popMark() ([]any, error) {
	if len(d.marks) == 0 {
		return nil, d.errorf("no MARK to pop to")
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := append([]any(nil), d.stack[m:]...)
	d.stack = d.stack[:m]
	return items, nil
}

func (d *decoder) run() (any, error) {
	for {
		d.opPos = d.pos
		b, err := d.read(1)
		if err != nil {
			return nil, err
		}
		op := b[0]
		switch op {
		case opProto:
			b, err := d.read(1)
			if err != nil {
				return nil, err
			}
			if b[0] < 2 || b[0] > 5 {
				return nil, d.errorf("pickle protocol %d (want 2 to 5)", b[0])
			}
		case opFrame:
			if _, err := d.read(8); err != nil {
				return nil, err
			}
		case opStop:
			if len(d.stack) != 1 || len(d.marks) > 0 {
				return nil, d.errorf("STOP with %d values on the stack and %d open MARKs", len(d.stack), len(d.marks))
			}
			return d.stack[0], nil
		case opMark:
			if len(d.marks) >= maxMarks {
				return nil, d.errorf("more than %d nested MARKs", maxMarks)
			}
			d.marks = append(d.marks, len(d.stack))
		case opPop:
			if len(d.stack) > d.floor() {
				d.stack = d.stack[:len(d.stack)-1]
			} else if _, err := d.popMark(); err != nil {
				return nil, err
			}
		case opPopMark:
			if _, err := d.popMark(); err != nil {
				return nil, err
			}
		case opDup:
			v, err := d.top()
			if err != nil {
				return nil, err
			}
			d.stack = append(d.stack, v)
		case opNone:
			d.stack = append(d.stack, nil)
		case opNewTrue:
			d.stack = append(d.stack, true)
		case opNewFalse:
			d.stack = append(d.stack, false)
		case opBinInt:
			b, err := d.read(4)
			if err != nil {
				return nil, err
			}
			d.stack = append(d.stack, int64(int32(binary.LittleEndian.Uint32(b))))
		case opBinInt1:
			b, err := d.read(1)
			if err != nil {
				return nil, err
			}
			d.stack = append(d.stack, int64(b[0]))
		case opBinInt2:
			b, err := d.read(2)
			if err != nil {
				return nil, err
			}
			d.stack = append(d.stack, int64(binary.LittleEndian.Uint16(b)))
		case opLong1, opLong4:
			var n int
			if op == opLong1 {
				b, err := d.read(1)
				if err != nil {
					return nil, err
				}
				n = int(b[0])
			} else {
				b, err := d.read(4)
				if err != nil {
					return nil, err
				}
				n = int(int32(binary.LittleEndian.Uint32(b)))
			}
			b, err := d.read(n)
			if err != nil {
				return nil, err
			}
			d.stack = append(d.stack, decodeLong(b))
		case opBinFloat:
			b, err := d.read(8)
			if err != nil {
				return nil, err
			}
			d.stack = append(d.stack, math.Float64frombits(binary.BigEndian.Uint64(b)))
		case opShortBinString, opShortBinUni, opShortBinBytes, opBinString, opBinUnicode, opBinBytes, opBinUnicode8, opBinBytes8:
			var n uint64
			switch op {
			case opShortBinString, opShortBinUni, opShortBinBytes:
				b, err := d.read(1)
				if err != nil {
					return nil, err
				}
				n = uint64(b[0])
			case opBinUnicode8, opBinBytes8:
				b, err := d.read(8)
				if err != nil {
					return nil, err
				}
				n = binary.LittleEndian.Uint64(b)
			default:
				b, err := d.read(4)
				if err != nil {
					return nil, err
				}
				n = uint64(binary.LittleEndian.Uint32(b))
			}
			if n > uint64(len(d.data)-d.pos) {
				return nil, d.errorf("string of %d bytes in a pickle with %d bytes left (truncated file?)", n, len(d.data)-d.pos)
			}
			b, err := d.read(int(n))
			if err != nil {
				return nil, err
			}
			if op == opShortBinBytes || op == opBinBytes || op == opBinBytes8 {
				d.stack = append(d.stack, bytes.Clone(b))
			} else {
				d.stack = append(d.stack, strings.ToValidUTF8(string(b), "\uFFFD"))
			}
		case opEmptyList, opEmptySet:
			d.stack = append(d.stack, &list{})
		case opEmptyDict:
			d.stack = append(d.stack, &dict{})
		case opEmptyTuple:
			d.stack = append(d.stack, tuple(nil))
		case opTuple1, opTuple2, opTuple3:
			n := int(op-opTuple1) + 1
			if len(d.stack)-d.floor() < n {
				return nil, d.errorf("TUPLE%d with %d values on the stack", n, len(d.stack)-d.floor())
			}
			t := append(tuple(nil), d.stack[len(d.stack)-n:]...)
			d.stack = append(d.stack[:len(d.stack)-n], t)
		case opTuple, opList, opFrozenSet:
			items, err := d.popMark()
			if err != nil {
				return nil, err
			}
			if op == opTuple {
				d.stack = append(d.stack, tuple(items))
			} else {
				d.stack = append(d.stack, &list{items: items})
			}
		case opDict:
			items, err := d.popMark()
			if err != nil {
				return nil, err
			}
			if len(items)%2 != 0 {
				return nil, d.errorf("DICT with an odd number of values")
			}
			m := &dict{}
			for i := 0; i < len(items); i += 2 {
				m.set(items[i], items[i+1])
			}
			d.stack = append(d.stack, m)
		case opAppend:
			v, err := d.pop()
			if err != nil {
				return nil, err
			}
			t, err := d.top()
			if err != nil {
				return nil, err
			}
			l, ok := t.(*list)
			if !ok {
				return nil, d.errorf("APPEND to a %s", typeName(t))
			}
			l.items = append(l.items, v)
		case opAppends, opAddItems:
			items, err := d.popMark()
			if err != nil {
				return nil, err
			}
			t, err := d.top()
			if err != nil {
				return nil, err
			}
			l, ok := t.(*list)
			if !ok {
				return nil, d.errorf("APPENDS to a %s", typeName(t))
			}
			l.items = append(l.items, items...)
		case opSetItem, opSetItems:
			var items []any
			if op == opSetItem {
				if len(d.stack)-d.floor() < 3 {
					return nil, d.errorf("SETITEM without a dict, a key and a value")
				}
				items = []any{d.stack[len(d.stack)-2], d.stack[len(d.stack)-1]}
				d.stack = d.stack[:len(d.stack)-2]
			} else {
				items, err = d.popMark()
				if err != nil {
					return nil, err
				}
				if len(items)%2 != 0 {
					return nil, d.errorf("SETITEMS with an odd number of values")
				}
			}
			t, err := d.top()
			if err != nil {
				return nil, err
			}
			m, ok := t.(*dict)
			if !ok {
				return nil, d.errorf("SETITEM on a %s", typeName(t))
			}
			for i := 0; i < len(items); i += 2 {
				m.set(items[i], items[i+1])
			}
		case opBinGet, opLongBinGet, opBinPut, opLongBinPut:
			var idx uint32
			if op == opBinGet || op == opBinPut {
				b, err := d.read(1)
				if err != nil {
					return nil, err
				}
				idx = uint32(b[0])
			} else {
				b, err := d.read(4)
				if err != nil {
					return nil, err
				}
				idx = binary.LittleEndian.Uint32(b)
			}
			if op == opBinGet || op == opLongBinGet {
				v, ok := d.memo[idx]
				if !ok {
					return nil, d.errorf("memo entry %d used before it was set", idx)
				}
				d.stack = append(d.stack, v)
				break
			}
			if idx >= maxMemo {
				return nil, d.errorf("memo index %d above %d", idx, maxMemo)
			}
			v, err := d.top()
			if err != nil {
				return nil, err
			}
			d.memo[idx] = v
		case opMemoize:
			v, err := d.top()
			if err != nil {
				return nil, err
			}
			if len(d.memo) >= maxMemo {
				return nil, d.errorf("more than %d memo entries", maxMemo)
			}
			d.memo[uint32(len(d.memo))] = v
		case opGlobal:
			module, err := d.line()
			if err != nil {
				return nil, err
			}
			name, err := d.line()
			if err != nil {
				return nil, err
			}
			g, err := d.global(module, name)
			if err != nil {
				return nil, err
			}
			d.stack = append(d.stack, g)
		case opStackGlobal:
			nv, err := d.pop()
			if err != nil {
				return nil, err
			}
			mv, err := d.pop()
			if err != nil {
				return nil, err
			}
			module, ok1 := mv.(string)
			name, ok2 := nv.(string)
			if !ok1 || !ok2 {
				return nil, d.errorf("STACK_GLOBAL with a %s and a %s, not two strings", typeName(mv), typeName(nv))
			}
			g, err := d.global(module, name)
			if err != nil {
				return nil, err
			}
			d.stack = append(d.stack, g)
		case opReduce, opNewObj:
			args, err := d.pop()
			if err != nil {
				return nil, err
			}
			fn, err := d.pop()
			if err != nil {
				return nil, err
			}
			v, err := d.call(fn, args)
			if err != nil {
				return nil, err
			}
			d.stack = append(d.stack, v)
		case opBuild:
			state, err := d.pop()
			if err != nil {
				return nil, err
			}
			obj, err := d.top()
			if err != nil {
				return nil, err
			}
			switch obj.(type) {
			case *dict, *tensorRef:
				// The attributes of an OrderedDict (a state dict's
				// _metadata) or of a Parameter: not needed.
				_ = state
			default:
				return nil, d.errorf("BUILD of a %s", typeName(obj))
			}
		case opBinPersID:
			pid, err := d.pop()
			if err != nil {
				return nil, err
			}
			st, err := d.persistent(pid)
			if err != nil {
				return nil, err
			}
			d.stack = append(d.stack, st)
		default:
			if what, ok := refusedOps[op]; ok {
				return nil, d.errorf("opcode %s is not allowed in a state dict", what)
			}
			return nil, d.errorf("unknown opcode 0x%02x (not a pickle, or a corrupt one)", op)
		}
	}
}

// refusedOps names the opcodes the decoder refuses.
var refusedOps = map[byte]string{
	'i':  "INST (an arbitrary object)",
	'o':  "OBJ (an arbitrary object)",
	0x92: "NEWOBJ_EX (an arbitrary object)",
	'P':  "PERSID (a text persistent id)",
	0x82: "EXT1 (an extension)",
	0x83: "EXT2 (an extension)",
	0x84: "EXT4 (an extension)",
	0x96: "BYTEARRAY8",
	0x97: "NEXT_BUFFER (an out-of-band buffer)",
	0x98: "READONLY_BUFFER",
	'I':  "INT (protocol 0)",
	'L':  "LONG (protocol 0)",
	'F':  "FLOAT (protocol 0)",
	'S':  "STRING (protocol 0)",
	'V':  "UNICODE (protocol 0)",
	'g':  "GET (protocol 0)",
	'p':  "PUT (protocol 0)",
}

// maxLine bounds the module and name of a GLOBAL opcode.
const maxLine = 256

// line reads a newline-terminated operand of GLOBAL.
func (d *decoder) line() (string, error) {
	rest := d.data[d.pos:min(len(d.data), d.pos+maxLine+1)]
	i := bytes.IndexByte(rest, '\n')
	if i < 0 {
		return "", d.errorf("GLOBAL without a newline in %d bytes", maxLine)
	}
	d.pos += i + 1
	return string(rest[:i]), nil
}

// decodeLong decodes a little-endian two's-complement integer.
func decodeLong(b []byte) any {
	if len(b) == 0 {
		return int64(0)
	}
	neg := b[len(b)-1]&0x80 != 0
	ext := byte(0)
	if neg {
		ext = 0xff
	}
	if len(b) > 8 {
		for _, c := range b[8:] {
			if c != ext {
				return bigInt{}
			}
		}
		if (b[7]&0x80 != 0) != neg {
			return bigInt{}
		}
		b = b[:8]
	}
	var buf [8]byte
	for i := range buf {
		buf[i] = ext
	}
	copy(buf[:], b)
	return int64(binary.LittleEndian.Uint64(buf[:]))
}

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
