// Package pickle decodes Python pickles (protocols 2 to 5) safely: it
// executes nothing, never recurses, and allocates only as input arrives.
//
// A [Decoder] runs the pickle machine (the stack, the MARKs, the memo) and
// decodes the operands of every opcode; what the values become is up to
// its caller, through a [Builder] that makes tuples, lists and dicts of
// the caller's own types, and an optional [Objects] that resolves the
// opcodes which would construct a Python object (GLOBAL, REDUCE, BUILD,
// persistent ids). Without Objects, those opcodes fail with an
// [*UnsupportedError].
//
// Scalars decode as:
//
//	None            nil
//	bool            bool
//	int             int64; uint64 above MaxInt64 (unless [Config.NoUint64]); BigInt when larger
//	float           float64
//	str             string (invalid UTF-8 becomes U+FFFD, one per byte)
//	bytes           []byte
//
// # Memory
//
// A length field never makes the decoder reserve memory the input does not
// hold: data longer than the read buffer is read in pieces. The decoder
// counts the memory of what it builds ([Decoder.Used]), including every
// backing array that a growing slice has left behind, and [Config.Budget]
// bounds it against the bytes read so far, so that memory stays linear in
// the input whatever the input.
package pickle

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Opcodes (the names of Python's Lib/pickle.py).
const (
	OpMark           = '('
	OpStop           = '.'
	OpPop            = '0'
	OpPopMark        = '1'
	OpDup            = '2'
	OpBinInt         = 'J'
	OpBinInt1        = 'K'
	OpBinInt2        = 'M'
	OpNone           = 'N'
	OpBinPersID      = 'Q'
	OpReduce         = 'R'
	OpBinString      = 'T'
	OpShortBinString = 'U'
	OpBinUnicode     = 'X'
	OpAppend         = 'a'
	OpBuild          = 'b'
	OpGlobal         = 'c'
	OpDict           = 'd'
	OpEmptyDict      = '}'
	OpAppends        = 'e'
	OpBinGet         = 'h'
	OpLongBinGet     = 'j'
	OpList           = 'l'
	OpEmptyList      = ']'
	OpBinPut         = 'q'
	OpLongBinPut     = 'r'
	OpSetItem        = 's'
	OpTuple          = 't'
	OpEmptyTuple     = ')'
	OpSetItems       = 'u'
	OpBinFloat       = 'G'
	OpBinBytes       = 'B'
	OpShortBinBytes  = 'C'
	OpProto          = 0x80
	OpNewObj         = 0x81
	OpTuple1         = 0x85
	OpTuple2         = 0x86
	OpTuple3         = 0x87
	OpNewTrue        = 0x88
	OpNewFalse       = 0x89
	OpLong1          = 0x8a
	OpLong4          = 0x8b
	OpShortBinUni    = 0x8c
	OpBinUnicode8    = 0x8d
	OpBinBytes8      = 0x8e
	OpEmptySet       = 0x8f
	OpAddItems       = 0x90
	OpFrozenSet      = 0x91
	OpStackGlobal    = 0x93
	OpMemoize        = 0x94
	OpFrame          = 0x95
	OpByteArray8     = 0x96
	OpReadOnlyBuffer = 0x98
)

// BigInt stands for an integer that does not fit in 64 bits.
type BigInt struct{}

// Sizes the decoder counts, in bytes.
const (
	// SizeofAny is the size of an interface value: a slot of a slice of
	// values.
	SizeofAny = int64(unsafe.Sizeof(any(nil)))
	// SizeofSlice is the size of a slice header.
	SizeofSlice  = int64(unsafe.Sizeof([]any(nil)))
	sizeofString = int64(unsafe.Sizeof(""))
	sizeofBox    = 8 // an int64, uint64 or float64 stored in an interface
)

// MemoChunk is the number of memo entries per chunk: Python memoizes nearly
// every object, so the memo of a large pickle has tens of millions of
// entries, which a single growing slice would copy again and again.
const MemoChunk = 1 << 16

// arenaChunk is the number of items allocated at once for containers:
// one allocation instead of one per list or dict.
const arenaChunk = 1 << 14

// maxReadChunk is the most the decoder allocates ahead of data it has read:
// a string of a larger declared length is read in pieces of this size, so a
// corrupt length cannot reserve memory the input does not contain.
const maxReadChunk = 1 << 20

// MaxLine bounds the module and the name of a GLOBAL opcode, and the class
// name an [UnsupportedError] carries, in bytes.
const MaxLine = 256

// Builder makes the containers of a pickle, of the caller's types. A cost
// it returns is the memory the call allocated, in bytes, beyond the items
// the decoder passed (those it counts itself).
type Builder interface {
	// Tuple returns a tuple of items; it may keep items.
	Tuple(items []any) (v any, cost int64)
	// List returns a list (or set) of items, nil for an empty one; it
	// may keep items.
	List(items []any) (v any, cost int64)
	// Dict returns a dict of alternating keys and values, nil for an
	// empty one; it may keep kv.
	Dict(kv []any) (v any, cost int64, err error)
	// Append adds items to list (APPEND, APPENDS, ADDITEMS, op says
	// which); it may keep items only when keep is set.
	Append(op byte, list any, items []any, keep bool) (cost int64, err error)
	// SetItems adds alternating keys and values to dict (SETITEM,
	// SETITEMS); it may keep kv only when keep is set.
	SetItems(op byte, dict any, kv []any, keep bool) (cost int64, err error)
	// TypeName names the Python type of a value, for messages.
	TypeName(v any) string
}

// Objects resolves the opcodes that construct Python objects. Its errors
// are returned as they are: the decoder's [Decoder.OpOffset] says where.
type Objects interface {
	// Global returns the class or function module.name (GLOBAL,
	// STACK_GLOBAL).
	Global(module, name string) (any, error)
	// Reduce applies fn to args (REDUCE, NEWOBJ).
	Reduce(fn, args any) (any, error)
	// Build sets the state of obj (BUILD).
	Build(obj, state any) error
	// Persistent returns the value of the persistent id pid (BINPERSID).
	Persistent(pid any) (any, error)
}

// Config says what a [Decoder] accepts. Its zero value accepts plain data
// of any protocol number up to 5, with no bound but the input's.
type Config struct {
	// MinProto is the lowest protocol a PROTO opcode may name.
	MinProto byte
	// SingleValue makes STOP require exactly one value on the stack;
	// otherwise it returns the top of a non-empty one.
	SingleValue bool
	// NoUint64 decodes integers above MaxInt64 as BigInt.
	NoUint64 bool
	// Buffers accepts BYTEARRAY8 (as []byte) and READONLY_BUFFER.
	Buffers bool
	// StrictUTF8 makes a str that is not valid UTF-8 an error instead of
	// a string with U+FFFD in place of each bad byte, which can make two
	// different strings one (Python writes a str with lone surrogates as
	// bytes that are not UTF-8).
	StrictUTF8 bool
	// MaxMarks bounds the nesting of MARKs; 0: unbounded.
	MaxMarks int
	// MaxMemo bounds the memo indices and the number of memo entries;
	// 0: unbounded.
	MaxMemo uint32
	// Size is the number of bytes the input holds, or 0 if unknown: when
	// known, a longer string or bytes fails before it is read.
	Size int64
	// Budget, if set, returns the memory the decoder may use (as
	// [Decoder.Used] counts it) after reading read bytes: past it,
	// decoding fails with a [*BudgetError].
	Budget func(read int64) int64
	// Objects resolves GLOBAL, STACK_GLOBAL, REDUCE, NEWOBJ, BUILD and
	// BINPERSID; nil refuses them.
	Objects Objects
}

// Error is an error of the pickle's opcodes: Msg says what is wrong with
// the opcode at Offset; Err is io.ErrUnexpectedEOF for an input that ends
// early, a [*BudgetError], an [*UnsupportedError] or a read error.
type Error struct {
	Offset int64 // of the failing opcode
	Msg    string
	Err    error
}

// Error returns Msg, or Err's message when there is no Msg.
func (e *Error) Error() string {
	if e.Msg == "" && e.Err != nil {
		return e.Err.Error()
	}
	return e.Msg
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// UnsupportedError is the error of an opcode the decoder refuses.
type UnsupportedError struct {
	Op    byte
	What  string // the opcode's name and what it does, as "INT (protocol 0 text)"
	Class string // for GLOBAL and STACK_GLOBAL, the class named, if readable; printable
}

// Error names the opcode.
func (e *UnsupportedError) Error() string { return "unsupported opcode " + e.What }

// BudgetError is the error of a pickle whose values take more memory than
// [Config.Budget] allows.
type BudgetError struct {
	Used int64 // memory of the values decoded, in bytes
	Read int64 // bytes of pickle read
}

// Error gives the memory used and the bytes read.
func (e *BudgetError) Error() string {
	return fmt.Sprintf("pickle values take %d bytes after %d bytes read", e.Used, e.Read)
}

// opNames names the opcodes that the decoder knows but may refuse, by
// what they do.
var opNames = map[byte]string{
	OpGlobal:         "GLOBAL (a Python class or function)",
	OpStackGlobal:    "STACK_GLOBAL (a Python class or function)",
	OpReduce:         "REDUCE (a call to construct an object)",
	OpBuild:          "BUILD (object state)",
	'i':              "INST (an object)",
	'o':              "OBJ (an object)",
	OpNewObj:         "NEWOBJ (an object)",
	0x92:             "NEWOBJ_EX (an object)",
	'P':              "PERSID (a persistent id)",
	OpBinPersID:      "BINPERSID (a persistent id)",
	0x82:             "EXT1 (an extension)",
	0x83:             "EXT2 (an extension)",
	0x84:             "EXT4 (an extension)",
	OpByteArray8:     "BYTEARRAY8 (an out-of-band buffer)",
	0x97:             "NEXT_BUFFER (an out-of-band buffer)",
	OpReadOnlyBuffer: "READONLY_BUFFER (an out-of-band buffer)",
	'I':              "INT (protocol 0 text)",
	'L':              "LONG (protocol 0 text)",
	'F':              "FLOAT (protocol 0 text)",
	'S':              "STRING (protocol 0 text)",
	'V':              "UNICODE (protocol 0 text)",
	'g':              "GET (protocol 0 text)",
	'p':              "PUT (protocol 0 text)",
}

// Decoder decodes one pickle from a buffered reader. It is for one
// goroutine.
type Decoder struct {
	used int64

	cfg     Config
	b       Builder
	r       *bufio.Reader
	off     int64 // bytes consumed
	opOff   int64 // offset of the opcode being executed
	stack   []any
	marks   []int   // stack lengths at each MARK
	memo    [][]any // memo entries 0..memoLen-1, in chunks of MemoChunk
	memoLen int
	memoMap map[uint32]any // entries at other indices
	arena   []any          // free space for the items of lists, tuples, dicts
	arenaN  int            // size of the last arena chunk
}

// NewDecoder returns a decoder of the pickle at the start of r, whose
// containers b makes.
func NewDecoder(r *bufio.Reader, b Builder, cfg Config) *Decoder {
	return &Decoder{r: r, b: b, cfg: cfg}
}

// Used returns the memory of the values decoded so far, in bytes, as the
// decoder counts it.
func (d *Decoder) Used() int64 { return d.used }

// Offset returns the number of bytes consumed.
func (d *Decoder) Offset() int64 { return d.off }

// OpOffset returns the offset of the opcode being executed (of the failing
// one after an error).
func (d *Decoder) OpOffset() int64 { return d.opOff }

func (d *Decoder) errorf(format string, args ...any) error {
	return &Error{Offset: d.opOff, Msg: fmt.Sprintf(format, args...)}
}

// ioError reports a failed read inside the opcode at d.opOff.
func (d *Decoder) ioError(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &Error{Offset: d.opOff, Msg: "input ends early (truncated file?)", Err: io.ErrUnexpectedEOF}
	}
	return &Error{Offset: d.opOff, Err: err}
}

// Decode decodes the pickle up to its STOP and returns its value. Its own
// errors are *Errors; those of the Builder and of Objects come as they are.
func (d *Decoder) Decode() (any, error) {
	for {
		d.opOff = d.off
		if d.cfg.Budget != nil && d.used > d.cfg.Budget(d.off) {
			return nil, &Error{Offset: d.off, Err: &BudgetError{Used: d.used, Read: d.off}}
		}
		op, err := d.r.ReadByte()
		if err != nil {
			return nil, d.ioError(err)
		}
		d.off++
		if done, err := d.step(op); done || err != nil {
			if err != nil {
				return nil, err
			}
			return d.stack[len(d.stack)-1], nil
		}
	}
}

// step executes op; done is set at STOP.
func (d *Decoder) step(op byte) (done bool, err error) {
	switch op {
	case OpProto:
		b, err := d.readByte()
		if err != nil {
			return false, err
		}
		if b > 5 || b < d.cfg.MinProto {
			return false, d.errorf("unsupported protocol %d (want 2 to 5)", b)
		}
	case OpFrame:
		// Frames only group opcodes for buffering; reading through a
		// bufio.Reader, the decoder has no use for them.
		if _, err := d.readN(8); err != nil {
			return false, err
		}
	case OpStop:
		if d.cfg.SingleValue && (len(d.stack) != 1 || len(d.marks) > 0) {
			return false, d.errorf("STOP with %d values on the stack and %d open MARKs", len(d.stack), len(d.marks))
		}
		if len(d.stack) == 0 || len(d.marks) > 0 {
			return false, d.errorf("STOP with an empty stack or an open MARK")
		}
		return true, nil
	case OpMark:
		if d.cfg.MaxMarks > 0 && len(d.marks) >= d.cfg.MaxMarks {
			return false, d.errorf("more than %d nested MARKs", d.cfg.MaxMarks)
		}
		c := cap(d.marks)
		d.marks = append(d.marks, len(d.stack))
		d.used += GrownBytes(c, cap(d.marks), 8)
	case OpPop:
		if len(d.stack) > d.floor() {
			d.stack = d.stack[:len(d.stack)-1]
		} else if _, err := d.popMark(); err != nil {
			return false, err
		}
	case OpPopMark:
		if _, err := d.popMark(); err != nil {
			return false, err
		}
	case OpDup:
		v, err := d.top()
		if err != nil {
			return false, err
		}
		d.push(v)
	case OpNone:
		d.push(nil)
	case OpNewTrue:
		d.push(true)
	case OpNewFalse:
		d.push(false)
	case OpBinInt:
		b, err := d.readN(4)
		if err != nil {
			return false, err
		}
		d.pushInt(int64(int32(binary.LittleEndian.Uint32(b))))
	case OpBinInt1:
		b, err := d.readByte()
		if err != nil {
			return false, err
		}
		d.push(int64(b))
	case OpBinInt2:
		b, err := d.readN(2)
		if err != nil {
			return false, err
		}
		d.pushInt(int64(binary.LittleEndian.Uint16(b)))
	case OpLong1:
		n, err := d.readByte()
		if err != nil {
			return false, err
		}
		return false, d.long(uint64(n))
	case OpLong4:
		b, err := d.readN(4)
		if err != nil {
			return false, err
		}
		n := int32(binary.LittleEndian.Uint32(b))
		if n < 0 {
			return false, d.errorf("LONG4 with negative length %d (truncated file?)", n)
		}
		return false, d.long(uint64(n))
	case OpBinFloat:
		b, err := d.readN(8)
		if err != nil {
			return false, err
		}
		d.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
		d.used += sizeofBox
	case OpShortBinString, OpShortBinUni, OpShortBinBytes:
		n, err := d.readByte()
		if err != nil {
			return false, err
		}
		return false, d.pushData(op, uint64(n))
	case OpBinString:
		b, err := d.readN(4)
		if err != nil {
			return false, err
		}
		n := int32(binary.LittleEndian.Uint32(b))
		if n < 0 {
			return false, d.errorf("BINSTRING with negative length %d", n)
		}
		return false, d.pushData(op, uint64(n))
	case OpBinUnicode, OpBinBytes:
		b, err := d.readN(4)
		if err != nil {
			return false, err
		}
		return false, d.pushData(op, uint64(binary.LittleEndian.Uint32(b)))
	case OpBinUnicode8, OpBinBytes8, OpByteArray8:
		if op == OpByteArray8 && !d.cfg.Buffers {
			return false, d.unsupported(op)
		}
		b, err := d.readN(8)
		if err != nil {
			return false, err
		}
		return false, d.pushData(op, binary.LittleEndian.Uint64(b))
	case OpEmptyList, OpEmptySet:
		v, cost := d.b.List(nil)
		d.push(v)
		d.used += cost
	case OpEmptyDict:
		v, cost, err := d.b.Dict(nil)
		if err != nil {
			return false, err
		}
		d.push(v)
		d.used += cost
	case OpEmptyTuple:
		v, _ := d.b.Tuple(nil) // an empty slice in an interface allocates nothing
		d.push(v)
	case OpTuple1, OpTuple2, OpTuple3:
		n := int(op-OpTuple1) + 1
		if len(d.stack)-d.floor() < n {
			return false, d.errorf("TUPLE%d with only %d items on the stack", n, len(d.stack)-d.floor())
		}
		items := d.alloc(n)
		copy(items, d.stack[len(d.stack)-n:])
		d.stack = d.stack[:len(d.stack)-n]
		v, cost := d.b.Tuple(items)
		d.push(v)
		d.used += cost
	case OpTuple, OpList, OpFrozenSet:
		items, err := d.popMark()
		if err != nil {
			return false, err
		}
		var v any
		var cost int64
		if op == OpTuple {
			v, cost = d.b.Tuple(items)
		} else {
			v, cost = d.b.List(items)
		}
		d.push(v)
		d.used += cost
	case OpDict:
		items, err := d.popMark()
		if err != nil {
			return false, err
		}
		if len(items)%2 != 0 {
			return false, d.errorf("DICT with an odd number of items")
		}
		v, cost, err := d.b.Dict(items)
		if err != nil {
			return false, err
		}
		d.push(v)
		d.used += cost
	case OpAppend:
		if len(d.stack)-d.floor() < 2 {
			return false, d.errorf("APPEND without a list and a value")
		}
		cost, err := d.b.Append(op, d.stack[len(d.stack)-2], d.stack[len(d.stack)-1:], false)
		if err != nil {
			return false, err
		}
		d.used += cost
		d.stack[len(d.stack)-1] = nil
		d.stack = d.stack[:len(d.stack)-1]
	case OpAppends, OpAddItems:
		items, err := d.popMark()
		if err != nil {
			return false, err
		}
		if len(d.stack) <= d.floor() {
			return false, d.errorf("APPENDS without a list")
		}
		cost, err := d.b.Append(op, d.stack[len(d.stack)-1], items, true)
		if err != nil {
			return false, err
		}
		d.used += cost
	case OpSetItem:
		if len(d.stack)-d.floor() < 3 {
			return false, d.errorf("SETITEM without a dict, a key and a value")
		}
		cost, err := d.b.SetItems(op, d.stack[len(d.stack)-3], d.stack[len(d.stack)-2:], false)
		if err != nil {
			return false, err
		}
		d.used += cost
		clear(d.stack[len(d.stack)-2:])
		d.stack = d.stack[:len(d.stack)-2]
	case OpSetItems:
		items, err := d.popMark()
		if err != nil {
			return false, err
		}
		if len(items)%2 != 0 {
			return false, d.errorf("SETITEMS with an odd number of items")
		}
		if len(d.stack) <= d.floor() {
			return false, d.errorf("SETITEMS without a dict")
		}
		cost, err := d.b.SetItems(op, d.stack[len(d.stack)-1], items, true)
		if err != nil {
			return false, err
		}
		d.used += cost
	case OpBinGet, OpLongBinGet:
		idx, err := d.memoIndex(op == OpBinGet)
		if err != nil {
			return false, err
		}
		v, ok := d.memoGet(idx)
		if !ok {
			return false, d.errorf("memo entry %d used before it was set", idx)
		}
		d.push(v)
	case OpBinPut, OpLongBinPut:
		idx, err := d.memoIndex(op == OpBinPut)
		if err != nil {
			return false, err
		}
		if d.cfg.MaxMemo > 0 && idx >= d.cfg.MaxMemo {
			return false, d.errorf("memo index %d above %d", idx, d.cfg.MaxMemo)
		}
		v, err := d.top()
		if err != nil {
			return false, err
		}
		d.memoPut(idx, v)
	case OpMemoize:
		v, err := d.top()
		if err != nil {
			return false, err
		}
		n := uint32(d.memoLen + len(d.memoMap))
		if d.cfg.MaxMemo > 0 && n >= d.cfg.MaxMemo {
			return false, d.errorf("more than %d memo entries", d.cfg.MaxMemo)
		}
		d.memoPut(n, v)
	case OpReadOnlyBuffer:
		if !d.cfg.Buffers {
			return false, d.unsupported(op)
		}
		if _, err := d.top(); err != nil {
			return false, err
		}
	default:
		if d.cfg.Objects != nil {
			switch op {
			case OpGlobal, OpStackGlobal, OpReduce, OpNewObj, OpBuild, OpBinPersID:
				return false, d.object(op)
			}
		}
		return false, d.unsupported(op)
	}
	return false, nil
}

// unsupported returns the error of a refused or unknown opcode.
func (d *Decoder) unsupported(op byte) error {
	what, ok := opNames[op]
	if !ok {
		return d.errorf("unknown opcode 0x%02x (not a pickle, or a corrupt one)", op)
	}
	return &Error{Offset: d.opOff, Err: &UnsupportedError{Op: op, What: what, Class: d.className(op)}}
}

// object executes an opcode that Objects resolves.
func (d *Decoder) object(op byte) error {
	obj := d.cfg.Objects
	switch op {
	case OpGlobal:
		module, err := d.line()
		if err != nil {
			return err
		}
		name, err := d.line()
		if err != nil {
			return err
		}
		g, err := obj.Global(module, name)
		if err != nil {
			return err
		}
		d.push(g)
	case OpStackGlobal:
		nv, err := d.pop()
		if err != nil {
			return err
		}
		mv, err := d.pop()
		if err != nil {
			return err
		}
		module, ok1 := mv.(string)
		name, ok2 := nv.(string)
		if !ok1 || !ok2 {
			return d.errorf("STACK_GLOBAL with a %s and a %s, not two strings", d.b.TypeName(mv), d.b.TypeName(nv))
		}
		g, err := obj.Global(module, name)
		if err != nil {
			return err
		}
		d.push(g)
	case OpReduce, OpNewObj:
		args, err := d.pop()
		if err != nil {
			return err
		}
		fn, err := d.pop()
		if err != nil {
			return err
		}
		v, err := obj.Reduce(fn, args)
		if err != nil {
			return err
		}
		d.push(v)
	case OpBuild:
		state, err := d.pop()
		if err != nil {
			return err
		}
		o, err := d.top()
		if err != nil {
			return err
		}
		return obj.Build(o, state)
	case OpBinPersID:
		pid, err := d.pop()
		if err != nil {
			return err
		}
		v, err := obj.Persistent(pid)
		if err != nil {
			return err
		}
		d.push(v)
	}
	return nil
}

// line reads a newline-terminated operand of GLOBAL.
func (d *Decoder) line() (string, error) {
	b, _ := d.r.Peek(MaxLine + 1)
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return "", d.errorf("GLOBAL without a newline in %d bytes", MaxLine)
	}
	s := string(b[:i])
	d.r.Discard(i + 1)
	d.off += int64(i + 1)
	return s, nil
}

// className returns "collections.OrderedDict" for a GLOBAL or
// STACK_GLOBAL opcode just read that names that class, "" otherwise or
// when the name cannot be read.
func (d *Decoder) className(op byte) string {
	var module, name string
	switch op {
	case OpStackGlobal: // the module and the name are on the stack
		if n := len(d.stack); n >= 2 {
			module, _ = d.stack[n-2].(string)
			name, _ = d.stack[n-1].(string)
		}
	case OpGlobal: // "module\nname\n" follows
		b, _ := d.r.Peek(MaxLine)
		if i := bytes.IndexByte(b, '\n'); i > 0 {
			module = string(b[:i])
			if j := bytes.IndexByte(b[i+1:], '\n'); j > 0 {
				name = string(b[i+1 : i+1+j])
			}
		}
	}
	if module == "" || name == "" || !utf8.ValidString(module+name) {
		return ""
	}
	return printableClass(module + "." + name)
}

// printableClass cuts a class name to MaxLine bytes and replaces control
// characters, so that an error message stays one short line.
func printableClass(s string) string {
	if len(s) > MaxLine {
		s = s[:MaxLine]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// GrownBytes returns the bytes of the backing array that append moved a
// slice to, from capacity before to after, of elements of size bytes: 0
// when it did not move. Builders count growth with it.
func GrownBytes(before, after int, size int64) int64 {
	if after == before {
		return 0
	}
	return int64(after) * size
}

func (d *Decoder) push(v any) {
	c := cap(d.stack)
	d.stack = append(d.stack, v)
	d.used += GrownBytes(c, cap(d.stack), SizeofAny)
}

// pushInt pushes an integer, counting the memory of its box: Go stores
// 0 to 255 in an interface without allocating.
func (d *Decoder) pushInt(v int64) {
	if v < 0 || v > 255 {
		d.used += sizeofBox
	}
	d.push(v)
}

// floor returns the stack length at the innermost open MARK: items below it
// belong to an enclosing construct.
func (d *Decoder) floor() int {
	if len(d.marks) == 0 {
		return 0
	}
	return d.marks[len(d.marks)-1]
}

func (d *Decoder) top() (any, error) {
	if len(d.stack) <= d.floor() {
		return nil, d.errorf("stack empty")
	}
	return d.stack[len(d.stack)-1], nil
}

func (d *Decoder) pop() (any, error) {
	v, err := d.top()
	if err != nil {
		return nil, err
	}
	d.stack[len(d.stack)-1] = nil
	d.stack = d.stack[:len(d.stack)-1]
	return v, nil
}

// popMark removes and returns the items pushed since the innermost MARK.
func (d *Decoder) popMark() ([]any, error) {
	if len(d.marks) == 0 {
		return nil, d.errorf("no MARK to pop to")
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := d.alloc(len(d.stack) - m)
	copy(items, d.stack[m:])
	clear(d.stack[m:])
	d.stack = d.stack[:m]
	return items, nil
}

// alloc returns a zeroed slice of n items whose capacity is n, so that
// appending to it never writes into a neighbour. Small slices come from a
// shared chunk.
func (d *Decoder) alloc(n int) []any {
	if n == 0 {
		return nil
	}
	d.used += SizeofAny * int64(n)
	if n > arenaChunk/8 {
		return make([]any, n)
	}
	if len(d.arena) < n {
		// The first chunks are small, so that a small pickle does not pay
		// for a large one; they double up to arenaChunk.
		d.arenaN = min(max(2*d.arenaN, 256), arenaChunk)
		d.arena = make([]any, max(d.arenaN, n))
	}
	items := d.arena[:n:n]
	d.arena = d.arena[n:]
	return items
}

func (d *Decoder) readByte() (byte, error) {
	b, err := d.r.ReadByte()
	if err != nil {
		return 0, d.ioError(err)
	}
	d.off++
	return b, nil
}

// readN returns the next n (at most the buffer size) bytes; the slice is
// valid until the next read.
func (d *Decoder) readN(n int) ([]byte, error) {
	b, err := d.r.Peek(n)
	if err != nil {
		return nil, d.ioError(err)
	}
	d.r.Discard(n)
	d.off += int64(n)
	return b, nil
}

// readData returns the next n bytes in a new slice, reading large ones in
// pieces so that memory grows only with data that really arrives.
func (d *Decoder) readData(n uint64) ([]byte, error) {
	if n <= uint64(d.r.Size()) {
		b, err := d.readN(int(n))
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), b...), nil
	}
	var out []byte
	for n > 0 {
		chunk := min(n, maxReadChunk)
		start := len(out)
		out = append(out, make([]byte, chunk)...)
		if _, err := io.ReadFull(d.r, out[start:]); err != nil {
			return nil, d.ioError(err)
		}
		d.off += int64(chunk)
		n -= chunk
	}
	return out, nil
}

// checkLength fails when the input's size is known and the n bytes of
// what (a "string", an "int") are not all there.
func (d *Decoder) checkLength(what string, n uint64) error {
	if left := max(d.cfg.Size-d.off, 0); d.cfg.Size > 0 && n > uint64(left) {
		return d.errorf("%s of %d bytes in a pickle with %d bytes left (truncated file?)", what, n, left)
	}
	return nil
}

// pushData reads a string or bytes operand of length n and pushes it.
func (d *Decoder) pushData(op byte, n uint64) error {
	if err := d.checkLength("string", n); err != nil {
		return err
	}
	if op == OpBinUnicode || op == OpShortBinUni || op == OpBinUnicode8 ||
		op == OpBinString || op == OpShortBinString {
		if n <= uint64(d.r.Size()) {
			// One copy: from the reader's buffer into the string.
			b, err := d.readN(int(n))
			if err != nil {
				return err
			}
			if err := d.checkUTF8(b); err != nil {
				return err
			}
			d.push(String(b))
			d.used += sizeofString + int64(n)
			return nil
		}
		b, err := d.readData(n)
		if err != nil {
			return err
		}
		if err := d.checkUTF8(b); err != nil {
			return err
		}
		d.push(String(b))
		d.used += sizeofString + int64(n)
		return nil
	}
	b, err := d.readData(n)
	if err != nil {
		return err
	}
	d.push(b)
	d.used += SizeofSlice + int64(n)
	return nil
}

// checkUTF8 fails for a str b that is not valid UTF-8 when
// [Config.StrictUTF8] is set.
func (d *Decoder) checkUTF8(b []byte) error {
	if !d.cfg.StrictUTF8 || utf8.Valid(b) {
		return nil
	}
	return d.errorf("a str of %d bytes that is not valid UTF-8", len(b))
}

// String converts a pickled str to a string. Python writes UTF-8; a byte
// that is not part of valid UTF-8 becomes U+FFFD, one per byte, as
// encoding/json does.
func String(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.Write(b[:size])
		}
		b = b[size:]
	}
	return sb.String()
}

// long decodes a little-endian two's-complement integer of n bytes.
func (d *Decoder) long(n uint64) error {
	if n == 0 {
		d.push(int64(0))
		return nil
	}
	if err := d.checkLength("int", n); err != nil {
		return err
	}
	d.used += sizeofBox
	b, err := d.readData(n)
	if err != nil {
		return err
	}
	d.push(decodeLong(b, d.cfg.NoUint64))
	return nil
}

// decodeLong decodes the non-empty little-endian two's-complement integer
// b: an int64, a uint64 (unless noUint64) or a BigInt.
func decodeLong(b []byte, noUint64 bool) any {
	n := len(b)
	neg := b[n-1]&0x80 != 0
	if n <= 8 {
		var v uint64
		for i := n - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		if neg && n < 8 {
			v |= math.MaxUint64 << (8 * uint(n)) // sign-extend
		}
		return int64(v)
	}
	ext := byte(0)
	if neg {
		ext = 0xff
	}
	for _, c := range b[8:] {
		if c != ext {
			return BigInt{}
		}
	}
	v := binary.LittleEndian.Uint64(b[:8])
	switch {
	case neg == (v>>63 == 1):
		return int64(v)
	case !neg && !noUint64:
		return v // 2^63 to 2^64-1
	}
	return BigInt{}
}

// memoIndex reads a BINPUT/BINGET (1-byte) or LONG_ (4-byte) memo index.
func (d *Decoder) memoIndex(short bool) (uint32, error) {
	if short {
		b, err := d.readByte()
		return uint32(b), err
	}
	b, err := d.readN(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *Decoder) memoGet(idx uint32) (any, bool) {
	if int(idx) < d.memoLen {
		return d.memo[idx/MemoChunk][idx%MemoChunk], true
	}
	v, ok := d.memoMap[idx]
	return v, ok
}

// memoPut stores v at idx: in the dense chunks when idx extends them by one
// (what Python's pickler always does), in a map otherwise. It counts the
// memory the entry takes: a slot of the chunks, or a map entry (key, value
// and the map's overhead) for a new index outside them.
func (d *Decoder) memoPut(idx uint32, v any) {
	switch {
	case int(idx) < d.memoLen:
		d.memo[idx/MemoChunk][idx%MemoChunk] = v
	case int(idx) == d.memoLen && d.memoMap == nil:
		d.used += SizeofAny
		// The first chunk grows by appending, up to MemoChunk entries, so
		// that a small pickle does not pay for a whole one.
		if d.memoLen%MemoChunk == 0 {
			d.memo = append(d.memo, make([]any, 0, min(64+d.memoLen, MemoChunk)))
		}
		c := &d.memo[idx/MemoChunk]
		*c = append(*c, v)
		d.memoLen++
	default:
		if d.memoMap == nil {
			d.memoMap = make(map[uint32]any)
		}
		if _, ok := d.memoMap[idx]; !ok {
			d.used += 3 * SizeofAny
		}
		d.memoMap[idx] = v
	}
}

// IsUnexpectedEOF reports whether err is the error of an input that ends
// early.
func IsUnexpectedEOF(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }
