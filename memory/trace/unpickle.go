package trace

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// This file is a minimal unpickler: it decodes the subset of Python's pickle
// protocols 2 to 5 that plain data needs (None, bools, ints, floats, str,
// bytes, tuples, lists, dicts, sets) into Go values, and refuses everything
// that would construct a Python object (GLOBAL, REDUCE, BUILD, ...). Why not
// a general unpickler is said in the package documentation, "# PyTorch
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
type pyBigInt struct{}

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
		grown = grownBytes(c, cap(d.kv), sizeofAny)
	}
	d.index = nil // rebuilt on the next get
	return grown
}

// grownBytes returns the bytes of the backing array that append moved a
// slice to, from capacity before to after of elements of size bytes: 0
// when it did not move.
func grownBytes(before, after int, size int64) int64 {
	if after == before {
		return 0
	}
	return int64(after) * size
}

// Pickle opcodes (Python's Lib/pickle.py names).
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
	opBinString      = 'T'
	opShortBinString = 'U'
	opBinUnicode     = 'X'
	opAppend         = 'a'
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
	opProto          = 0x80
	opTuple1         = 0x85
	opTuple2         = 0x86
	opTuple3         = 0x87
	opNewTrue        = 0x88
	opNewFalse       = 0x89
	opLong1          = 0x8a
	opLong4          = 0x8b
	opBinBytes       = 'B'
	opShortBinBytes  = 'C'
	opShortBinUni    = 0x8c
	opBinUnicode8    = 0x8d
	opBinBytes8      = 0x8e
	opEmptySet       = 0x8f
	opAddItems       = 0x90
	opFrozenSet      = 0x91
	opMemoize        = 0x94
	opFrame          = 0x95
	opByteArray8     = 0x96
	opReadOnlyBuffer = 0x98
)

// unsupportedOps names the opcodes the decoder refuses, by what they do.
var unsupportedOps = map[byte]string{
	'c':  "GLOBAL (a Python class or function)",
	0x93: "STACK_GLOBAL (a Python class or function)",
	'R':  "REDUCE (a call to construct an object)",
	'b':  "BUILD (object state)",
	'i':  "INST (an object)",
	'o':  "OBJ (an object)",
	0x81: "NEWOBJ (an object)",
	0x92: "NEWOBJ_EX (an object)",
	'P':  "PERSID (a persistent id)",
	'Q':  "BINPERSID (a persistent id)",
	0x82: "EXT1 (an extension)",
	0x83: "EXT2 (an extension)",
	0x84: "EXT4 (an extension)",
	0x97: "NEXT_BUFFER (an out-of-band buffer)",
	'I':  "INT (protocol 0 text)",
	'L':  "LONG (protocol 0 text)",
	'F':  "FLOAT (protocol 0 text)",
	'S':  "STRING (protocol 0 text)",
	'V':  "UNICODE (protocol 0 text)",
	'g':  "GET (protocol 0 text)",
	'p':  "PUT (protocol 0 text)",
}

// unpickler decodes one pickle from a buffered reader.
type unpickler struct {
	// used is the memory of the values built so far, in bytes, as the
	// decoder counts it (the heap sizes of its allocations, approximately,
	// with every backing array a slice has outgrown).
	used int64

	r       *bufio.Reader
	off     int64 // bytes consumed
	opOff   int64 // offset of the opcode being executed
	stack   []any
	marks   []int   // stack lengths at each MARK
	memo    [][]any // memo entries 0..memoLen-1, in chunks of memoChunk
	memoLen int
	memoMap map[uint32]any // entries at other indices
	arena   []any          // free space for the items of lists, tuples, dicts
	arenaN  int            // size of the last arena chunk
}

// memoChunk is the number of memo entries per chunk: Python memoizes nearly
// every object, so the memo of a large pickle has tens of millions of
// entries, which a single growing slice would copy again and again.
const memoChunk = 1 << 16

// arenaChunk is the number of items allocated at once for containers:
// one allocation instead of one per list or dict.
const arenaChunk = 1 << 14

// maxReadChunk is the most the decoder allocates ahead of data it has read:
// a string of a larger declared length is read in pieces of this size, so a
// corrupt length cannot reserve memory the input does not contain.
const maxReadChunk = 1 << 20

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
	u := &unpickler{r: r}
	v, err := u.run()
	return v, u.off, u.used, err
}

func (u *unpickler) errorf(format string, args ...any) error {
	return &ParseError{Kind: KindPickle, Offset: u.opOff, Msg: "pickle: " + fmt.Sprintf(format, args...)}
}

// ioError reports a failed read inside the opcode at u.opOff.
func (u *unpickler) ioError(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &ParseError{Kind: KindPickle, Offset: u.opOff, Msg: "pickle: input ends early (truncated file?)", Err: io.ErrUnexpectedEOF}
	}
	return &ParseError{Kind: KindPickle, Offset: u.opOff, Err: err}
}

func (u *unpickler) run() (any, error) {
	for {
		if u.used > pickleBudget(u.off) {
			return nil, &ParseError{Kind: KindPickle, Offset: u.off, Err: &LimitError{Limit: pickleExpansion, Pickle: true, Used: u.used, Read: u.off}}
		}
		u.opOff = u.off
		op, err := u.r.ReadByte()
		if err != nil {
			return nil, u.ioError(err)
		}
		u.off++
		switch op {
		case opProto:
			b, err := u.readByte()
			if err != nil {
				return nil, err
			}
			if b > 5 {
				return nil, u.errorf("unsupported protocol %d (want 2 to 5)", b)
			}
		case opFrame:
			// Frames only group opcodes for buffering; reading through a
			// bufio.Reader, the decoder has no use for them.
			if _, err := u.readN(8); err != nil {
				return nil, err
			}
		case opStop:
			if len(u.stack) == 0 || len(u.marks) > 0 {
				return nil, u.errorf("STOP with an empty stack or an open MARK")
			}
			return u.stack[len(u.stack)-1], nil
		case opMark:
			c := cap(u.marks)
			u.marks = append(u.marks, len(u.stack))
			u.used += grownBytes(c, cap(u.marks), 8)
		case opPop:
			if len(u.stack) > 0 && (len(u.marks) == 0 || u.marks[len(u.marks)-1] < len(u.stack)) {
				u.stack = u.stack[:len(u.stack)-1]
			} else if _, err := u.popMark(); err != nil {
				return nil, err
			}
		case opPopMark:
			if _, err := u.popMark(); err != nil {
				return nil, err
			}
		case opDup:
			v, err := u.top()
			if err != nil {
				return nil, err
			}
			u.push(v)
		case opNone:
			u.push(nil)
		case opNewTrue:
			u.push(true)
		case opNewFalse:
			u.push(false)
		case opBinInt:
			b, err := u.readN(4)
			if err != nil {
				return nil, err
			}
			u.pushInt(int64(int32(binary.LittleEndian.Uint32(b))))
		case opBinInt1:
			b, err := u.readByte()
			if err != nil {
				return nil, err
			}
			u.push(int64(b))
		case opBinInt2:
			b, err := u.readN(2)
			if err != nil {
				return nil, err
			}
			u.pushInt(int64(binary.LittleEndian.Uint16(b)))
		case opLong1:
			n, err := u.readByte()
			if err != nil {
				return nil, err
			}
			if err := u.long(int(n)); err != nil {
				return nil, err
			}
		case opLong4:
			b, err := u.readN(4)
			if err != nil {
				return nil, err
			}
			n := int32(binary.LittleEndian.Uint32(b))
			if n < 0 {
				return nil, u.errorf("LONG4 with negative length %d", n)
			}
			if err := u.long(int(n)); err != nil {
				return nil, err
			}
		case opBinFloat:
			b, err := u.readN(8)
			if err != nil {
				return nil, err
			}
			u.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
			u.used += sizeofBox
		case opShortBinString, opShortBinUni, opShortBinBytes:
			n, err := u.readByte()
			if err != nil {
				return nil, err
			}
			if err := u.pushData(op, uint64(n)); err != nil {
				return nil, err
			}
		case opBinString:
			b, err := u.readN(4)
			if err != nil {
				return nil, err
			}
			n := int32(binary.LittleEndian.Uint32(b))
			if n < 0 {
				return nil, u.errorf("BINSTRING with negative length %d", n)
			}
			if err := u.pushData(op, uint64(n)); err != nil {
				return nil, err
			}
		case opBinUnicode, opBinBytes:
			b, err := u.readN(4)
			if err != nil {
				return nil, err
			}
			if err := u.pushData(op, uint64(binary.LittleEndian.Uint32(b))); err != nil {
				return nil, err
			}
		case opBinUnicode8, opBinBytes8, opByteArray8:
			b, err := u.readN(8)
			if err != nil {
				return nil, err
			}
			if err := u.pushData(op, binary.LittleEndian.Uint64(b)); err != nil {
				return nil, err
			}
		case opEmptyList, opEmptySet:
			u.push(&pyList{})
			u.used += sizeofList
		case opEmptyDict:
			u.push(&pyDict{})
			u.used += sizeofDict
		case opEmptyTuple:
			u.push(pyTuple(nil))
		case opTuple1, opTuple2, opTuple3:
			n := int(op-opTuple1) + 1
			if len(u.stack)-u.floor() < n {
				return nil, u.errorf("TUPLE%d with only %d items on the stack", n, len(u.stack)-u.floor())
			}
			t := pyTuple(u.alloc(n))
			copy(t, u.stack[len(u.stack)-n:])
			u.stack = u.stack[:len(u.stack)-n]
			u.push(t)
			u.used += sizeofSlice
		case opTuple, opList, opFrozenSet:
			items, err := u.popMark()
			if err != nil {
				return nil, err
			}
			if op == opTuple {
				u.push(pyTuple(items))
				u.used += sizeofSlice
			} else {
				u.push(&pyList{items: items})
				u.used += sizeofList
			}
		case opDict:
			items, err := u.popMark()
			if err != nil {
				return nil, err
			}
			if len(items)%2 != 0 {
				return nil, u.errorf("DICT with an odd number of items")
			}
			u.push(&pyDict{kv: items})
			u.used += sizeofDict
		case opAppend:
			if len(u.stack)-u.floor() < 2 {
				return nil, u.errorf("APPEND without a list and a value")
			}
			v := u.stack[len(u.stack)-1]
			u.stack = u.stack[:len(u.stack)-1]
			l, ok := u.stack[len(u.stack)-1].(*pyList)
			if !ok {
				return nil, u.errorf("APPEND to a %s, not a list", pyTypeName(u.stack[len(u.stack)-1]))
			}
			c := cap(l.items)
			l.items = append(l.items, v)
			u.used += grownBytes(c, cap(l.items), sizeofAny)
		case opAppends, opAddItems:
			items, err := u.popMark()
			if err != nil {
				return nil, err
			}
			if len(u.stack) <= u.floor() {
				return nil, u.errorf("APPENDS without a list")
			}
			l, ok := u.stack[len(u.stack)-1].(*pyList)
			if !ok {
				return nil, u.errorf("APPENDS to a %s, not a list", pyTypeName(u.stack[len(u.stack)-1]))
			}
			if l.items == nil {
				l.items = items
			} else {
				c := cap(l.items)
				l.items = append(l.items, items...)
				u.used += grownBytes(c, cap(l.items), sizeofAny)
			}
		case opSetItem:
			if len(u.stack)-u.floor() < 3 {
				return nil, u.errorf("SETITEM without a dict, a key and a value")
			}
			d, ok := u.stack[len(u.stack)-3].(*pyDict)
			if !ok {
				return nil, u.errorf("SETITEM on a %s, not a dict", pyTypeName(u.stack[len(u.stack)-3]))
			}
			c := cap(d.kv)
			d.kv = append(d.kv, u.stack[len(u.stack)-2], u.stack[len(u.stack)-1])
			d.index = nil
			u.used += grownBytes(c, cap(d.kv), sizeofAny)
			clear(u.stack[len(u.stack)-2:])
			u.stack = u.stack[:len(u.stack)-2]
		case opSetItems:
			items, err := u.popMark()
			if err != nil {
				return nil, err
			}
			if len(items)%2 != 0 {
				return nil, u.errorf("SETITEMS with an odd number of items")
			}
			if len(u.stack) <= u.floor() {
				return nil, u.errorf("SETITEMS without a dict")
			}
			d, ok := u.stack[len(u.stack)-1].(*pyDict)
			if !ok {
				return nil, u.errorf("SETITEMS on a %s, not a dict", pyTypeName(u.stack[len(u.stack)-1]))
			}
			u.used += d.setItems(items)
		case opBinGet, opLongBinGet:
			idx, err := u.memoIndex(op == opBinGet)
			if err != nil {
				return nil, err
			}
			v, ok := u.memoGet(idx)
			if !ok {
				return nil, u.errorf("memo entry %d used before it was set", idx)
			}
			u.push(v)
		case opBinPut, opLongBinPut:
			idx, err := u.memoIndex(op == opBinPut)
			if err != nil {
				return nil, err
			}
			v, err := u.top()
			if err != nil {
				return nil, err
			}
			u.memoCost(idx)
			u.memoPut(idx, v)
		case opMemoize:
			v, err := u.top()
			if err != nil {
				return nil, err
			}
			u.memoCost(uint32(u.memoLen + len(u.memoMap)))
			u.memoPut(uint32(u.memoLen+len(u.memoMap)), v)
		case opReadOnlyBuffer:
			if _, err := u.top(); err != nil {
				return nil, err
			}
		default:
			if what, ok := unsupportedOps[op]; ok {
				class := u.className(op)
				if class != "" {
					what = strings.Replace(what, "(a Python class or function)", "(the Python class or function "+class+")", 1)
				}
				return nil, u.errorf("unsupported opcode %s: only plain data (dicts, lists, tuples, numbers, strings) can be read%s", what, classHint(class))
			}
			return nil, u.errorf("unknown opcode 0x%02x (not a pickle, or a corrupt one)", op)
		}
	}
}

// className returns "collections.OrderedDict" for a GLOBAL or
// STACK_GLOBAL opcode just read that names that class, "" otherwise or
// when the name cannot be read.
func (u *unpickler) className(op byte) string {
	var module, name string
	switch op {
	case 0x93: // STACK_GLOBAL: the module and the name are on the stack
		if n := len(u.stack); n >= 2 {
			module, _ = u.stack[n-2].(string)
			name, _ = u.stack[n-1].(string)
		}
	case 'c': // GLOBAL: "module\nname\n" follows
		b, _ := u.r.Peek(maxClassName)
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

// maxClassName bounds the bytes read for the class a GLOBAL names.
const maxClassName = 256

// printableClass cuts a class name to maxClassName bytes and replaces
// control characters, so that an error message stays one short line.
func printableClass(s string) string {
	if len(s) > maxClassName {
		s = s[:maxClassName]
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

func (u *unpickler) push(v any) {
	c := cap(u.stack)
	u.stack = append(u.stack, v)
	u.used += grownBytes(c, cap(u.stack), sizeofAny)
}

// pushInt pushes an integer, counting the memory of its box: Go stores
// 0 to 255 in an interface without allocating.
func (u *unpickler) pushInt(v int64) {
	if v < 0 || v > 255 {
		u.used += sizeofBox
	}
	u.push(v)
}

// floor returns the stack length at the innermost open MARK: items below it
// belong to an enclosing construct.
func (u *unpickler) floor() int {
	if len(u.marks) == 0 {
		return 0
	}
	return u.marks[len(u.marks)-1]
}

func (u *unpickler) top() (any, error) {
	if len(u.stack) <= u.floor() {
		return nil, u.errorf("stack empty")
	}
	return u.stack[len(u.stack)-1], nil
}

// popMark removes and returns the items pushed since the innermost MARK.
func (u *unpickler) popMark() ([]any, error) {
	if len(u.marks) == 0 {
		return nil, u.errorf("no MARK to pop to")
	}
	m := u.marks[len(u.marks)-1]
	u.marks = u.marks[:len(u.marks)-1]
	items := u.alloc(len(u.stack) - m)
	copy(items, u.stack[m:])
	clear(u.stack[m:])
	u.stack = u.stack[:m]
	return items, nil
}

// alloc returns a zeroed slice of n items whose capacity is n, so that
// appending to it never writes into a neighbour. Small slices come from a
// shared chunk.
func (u *unpickler) alloc(n int) []any {
	if n == 0 {
		return nil
	}
	u.used += sizeofAny * int64(n)
	if n > arenaChunk/8 {
		return make([]any, n)
	}
	if len(u.arena) < n {
		// The first chunks are small, so that a small pickle does not pay
		// for a large one; they double up to arenaChunk.
		u.arenaN = min(max(2*u.arenaN, 256), arenaChunk)
		u.arena = make([]any, max(u.arenaN, n))
	}
	items := u.arena[:n:n]
	u.arena = u.arena[n:]
	return items
}

func (u *unpickler) readByte() (byte, error) {
	b, err := u.r.ReadByte()
	if err != nil {
		return 0, u.ioError(err)
	}
	u.off++
	return b, nil
}

// readN returns the next n (at most the buffer size) bytes; the slice is
// valid until the next read.
func (u *unpickler) readN(n int) ([]byte, error) {
	b, err := u.r.Peek(n)
	if err != nil {
		return nil, u.ioError(err)
	}
	u.r.Discard(n)
	u.off += int64(n)
	return b, nil
}

// readData returns the next n bytes in a new slice, reading large ones in
// pieces so that memory grows only with data that really arrives.
func (u *unpickler) readData(n uint64) ([]byte, error) {
	if n <= uint64(u.r.Size()) {
		b, err := u.readN(int(n))
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
		if _, err := io.ReadFull(u.r, out[start:]); err != nil {
			return nil, u.ioError(err)
		}
		u.off += int64(chunk)
		n -= chunk
	}
	return out, nil
}

// pushData reads a string or bytes operand of length n and pushes it.
func (u *unpickler) pushData(op byte, n uint64) error {
	if op == opBinUnicode || op == opShortBinUni || op == opBinUnicode8 ||
		op == opBinString || op == opShortBinString {
		if n <= uint64(u.r.Size()) {
			// One copy: from the reader's buffer into the string.
			b, err := u.readN(int(n))
			if err != nil {
				return err
			}
			u.push(pyString(b))
			u.used += sizeofString + int64(n)
			return nil
		}
		b, err := u.readData(n)
		if err != nil {
			return err
		}
		u.push(pyString(b))
		u.used += sizeofString + int64(n)
		return nil
	}
	b, err := u.readData(n)
	if err != nil {
		return err
	}
	u.push(b)
	u.used += sizeofSlice + int64(n)
	return nil
}

// pyString converts a pickled str to a string. Python writes UTF-8; a byte
// that is not part of valid UTF-8 becomes U+FFFD, one per byte, as the JSON
// writer and encoding/json do, so that a snapshot reads the same from the
// pickle and from its JSON.
func pyString(b []byte) string {
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
func (u *unpickler) long(n int) error {
	if n == 0 {
		u.push(int64(0))
		return nil
	}
	u.used += sizeofBox
	b, err := u.readData(uint64(n))
	if err != nil {
		return err
	}
	neg := b[n-1]&0x80 != 0
	if n <= 8 {
		var v uint64
		for i := n - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		if neg && n < 8 {
			v |= math.MaxUint64 << (8 * uint(n)) // sign-extend
		}
		u.push(int64(v))
		return nil
	}
	ext := byte(0)
	if neg {
		ext = 0xff
	}
	for _, c := range b[8:] {
		if c != ext {
			u.push(pyBigInt{})
			return nil
		}
	}
	v := binary.LittleEndian.Uint64(b[:8])
	switch {
	case neg == (v>>63 == 1):
		u.push(int64(v))
	case !neg:
		u.push(v) // 2^63 to 2^64-1
	default:
		u.push(pyBigInt{})
	}
	return nil
}

// memoIndex reads a BINPUT/BINGET (1-byte) or LONG_ (4-byte) memo index.
func (u *unpickler) memoIndex(short bool) (uint32, error) {
	if short {
		b, err := u.readByte()
		return uint32(b), err
	}
	b, err := u.readN(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

// memoCost counts the memory that memoPut(idx, ...) takes: an entry of the
// dense chunks, or a map entry (key, value and the map's overhead) for a
// new index outside them.
func (u *unpickler) memoCost(idx uint32) {
	switch {
	case int(idx) < u.memoLen:
	case int(idx) == u.memoLen && u.memoMap == nil:
		u.used += sizeofAny
	default:
		if _, ok := u.memoMap[idx]; !ok {
			u.used += 3 * sizeofAny
		}
	}
}

func (u *unpickler) memoGet(idx uint32) (any, bool) {
	if int(idx) < u.memoLen {
		return u.memo[idx/memoChunk][idx%memoChunk], true
	}
	v, ok := u.memoMap[idx]
	return v, ok
}

// memoPut stores v at idx: in the dense chunks when idx extends them by one
// (what Python's pickler always does), in a map otherwise.
func (u *unpickler) memoPut(idx uint32, v any) {
	switch {
	case int(idx) < u.memoLen:
		u.memo[idx/memoChunk][idx%memoChunk] = v
	case int(idx) == u.memoLen && u.memoMap == nil:
		// The first chunk grows by appending, up to memoChunk entries, so
		// that a small pickle does not pay for a whole one.
		if u.memoLen%memoChunk == 0 {
			u.memo = append(u.memo, make([]any, 0, min(64+u.memoLen, memoChunk)))
		}
		c := &u.memo[idx/memoChunk]
		*c = append(*c, v)
		u.memoLen++
	default:
		if u.memoMap == nil {
			u.memoMap = make(map[uint32]any)
		}
		u.memoMap[idx] = v
	}
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
