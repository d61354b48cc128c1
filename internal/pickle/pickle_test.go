package pickle

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// The containers of the test builder.
type (
	tuple []any
	list  struct{ items []any }
	dict  struct{ kv []any }
)

// testError is the error of the test Builder and Objects.
type testError string

func (e testError) Error() string { return string(e) }

// builder is a Builder of the test types; it counts nothing.
type builder struct{}

func (builder) Tuple(items []any) (any, int64)    { return tuple(items), SizeofSlice }
func (builder) List(items []any) (any, int64)     { return &list{items}, 32 }
func (builder) Dict(kv []any) (any, int64, error) { return &dict{kv}, 32, nil }
func (builder) TypeName(v any) string             { return fmt.Sprintf("%T", v) }
func (builder) Append(op byte, v any, items []any, keep bool) (int64, error) {
	l, ok := v.(*list)
	if !ok {
		return 0, testError(fmt.Sprintf("append to a %T", v))
	}
	l.items = append(l.items, items...)
	return 0, nil
}
func (builder) SetItems(op byte, v any, kv []any, keep bool) (int64, error) {
	d, ok := v.(*dict)
	if !ok {
		return 0, testError(fmt.Sprintf("setitems on a %T", v))
	}
	d.kv = append(d.kv, kv...)
	return 0, nil
}

// global is what the test Objects makes of a GLOBAL.
type global string

// objects resolves any global; REDUCE makes a call, BUILD accepts only
// dicts, a persistent id becomes pid.
type objects struct{}

type call struct {
	fn   global
	args any
}

type pid struct{ id any }

func (objects) Global(module, name string) (any, error) { return global(module + "." + name), nil }
func (objects) Reduce(fn, args any) (any, error) {
	g, ok := fn.(global)
	if !ok {
		return nil, testError("call of a non-global")
	}
	return call{g, args}, nil
}
func (objects) Build(obj, state any) error {
	if _, ok := obj.(*dict); !ok {
		return testError("build of a non-dict")
	}
	return nil
}
func (objects) Persistent(id any) (any, error) { return pid{id}, nil }

// p builds a pickle: bytes and strings are copied, ints are appended as
// single bytes.
func p(parts ...any) []byte {
	var b []byte
	for _, x := range parts {
		switch x := x.(type) {
		case string:
			b = append(b, x...)
		case []byte:
			b = append(b, x...)
		case int:
			b = append(b, byte(x))
		case rune: // an opcode given as a character
			b = append(b, byte(x))
		case byte:
			b = append(b, x)
		default:
			panic(fmt.Sprintf("p: %T", x))
		}
	}
	return b
}

func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func decode(in []byte, cfg Config) (any, *Decoder, error) {
	d := NewDecoder(bufio.NewReader(bytes.NewReader(in)), builder{}, cfg)
	v, err := d.Decode()
	return v, d, err
}

func TestDecodeValues(t *testing.T) {
	long1 := func(b ...byte) []byte { return p(OpProto, 2, OpLong1, len(b), b, OpStop) }
	tests := []struct {
		name string
		in   []byte
		cfg  Config
		want any
	}{
		{"none", p(OpProto, 2, OpNone, OpStop), Config{}, nil},
		{"true", p(OpProto, 2, OpNewTrue, OpStop), Config{}, true},
		{"binint1", p(OpProto, 2, OpBinInt1, 200, OpStop), Config{}, int64(200)},
		{"binint2", p(OpProto, 2, OpBinInt2, 0x34, 0x12, OpStop), Config{}, int64(0x1234)},
		{"binint", p(OpProto, 2, OpBinInt, u32(math.MaxUint32-6), OpStop), Config{}, int64(-7)},
		{"long1 empty", long1(), Config{}, int64(0)},
		{"long1 -129", long1(0x7f, 0xff), Config{}, int64(-129)},
		{"long1 min int64", long1(0, 0, 0, 0, 0, 0, 0, 0x80), Config{}, int64(math.MinInt64)},
		{"long1 max uint64", long1(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0), Config{}, uint64(math.MaxUint64)},
		{"long1 max uint64 NoUint64", long1(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0), Config{NoUint64: true}, BigInt{}},
		{"long1 padded", long1(5, 0, 0, 0, 0, 0, 0, 0, 0, 0), Config{}, int64(5)},
		{"long1 -1 padded", long1(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), Config{}, int64(-1)},
		{"long1 2^64", long1(0, 0, 0, 0, 0, 0, 0, 0, 1), Config{}, BigInt{}},
		{"long1 below min int64", long1(0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff), Config{}, BigInt{}},
		{"long4", p(OpProto, 2, OpLong4, u32(2), 0, 1, OpStop), Config{}, int64(256)},
		{"binfloat", p(OpProto, 2, OpBinFloat, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, OpStop), Config{}, 1.5},
		{"short str", p(OpProto, 4, OpShortBinUni, 2, "hi", OpStop), Config{}, "hi"},
		{"binstring", p(OpProto, 2, OpBinString, u32(2), "hi", OpStop), Config{}, "hi"},
		{"invalid utf-8", p(OpProto, 4, OpShortBinUni, 4, "a\xed\xa0\x80", OpStop), Config{}, "a\ufffd\ufffd\ufffd"},
		{"bytes", p(OpProto, 3, OpShortBinBytes, 2, 0, 1, OpStop), Config{}, []byte{0, 1}},
		{"bytearray8", p(OpProto, 5, OpByteArray8, u64(1), 7, OpReadOnlyBuffer, OpStop), Config{Buffers: true}, []byte{7}},
		{"tuple2", p(OpProto, 2, OpNone, OpNewTrue, OpTuple2, OpStop), Config{}, tuple{nil, true}},
		{"tuple", p(OpProto, 2, OpMark, OpNone, OpTuple, OpStop), Config{}, tuple{nil}},
		{"empty tuple", p(OpProto, 2, OpEmptyTuple, OpStop), Config{}, tuple(nil)},
		{"list", p(OpProto, 2, OpMark, OpNone, OpNewFalse, OpList, OpStop), Config{}, &list{[]any{nil, false}}},
		{"appends", p(OpProto, 2, OpEmptyList, OpNone, OpAppend, OpMark, OpNewTrue, OpAppends, OpStop), Config{}, &list{[]any{nil, true}}},
		{"set", p(OpProto, 4, OpEmptySet, OpMark, OpNone, OpAddItems, OpStop), Config{}, &list{[]any{nil}}},
		{"frozenset", p(OpProto, 4, OpMark, OpNone, OpFrozenSet, OpStop), Config{}, &list{[]any{nil}}},
		{"dict", p(OpProto, 2, OpMark, OpShortBinUni, 1, "a", OpNone, OpDict, OpStop), Config{}, &dict{[]any{"a", nil}}},
		{"setitem(s)", p(OpProto, 2, OpEmptyDict, OpNone, OpNewTrue, OpSetItem, OpMark, OpNewFalse, OpNone, OpSetItems, OpStop), Config{}, &dict{[]any{nil, true, false, nil}}},
		{"memo", p(OpProto, 2, OpShortBinUni, 1, "k", OpBinPut, 0, OpPop, OpBinGet, 0, OpStop), Config{}, "k"},
		{"sparse memo", p(OpProto, 2, OpNewTrue, OpLongBinPut, u32(math.MaxUint32), OpPop, OpLongBinGet, u32(math.MaxUint32), OpStop), Config{}, true},
		{"memoize", p(OpProto, 4, OpNone, OpMemoize, OpNewTrue, OpMemoize, OpPop, OpPop, OpBinGet, 1, OpStop), Config{}, true},
		{"dup", p(OpProto, 2, OpNewTrue, OpDup, OpTuple2, OpStop), Config{}, tuple{true, true}},
		{"pop mark", p(OpProto, 2, OpNewTrue, OpMark, OpNone, OpNone, OpPopMark, OpStop), Config{}, true},
		{"pop empties mark", p(OpProto, 2, OpNewTrue, OpMark, OpPop, OpStop), Config{}, true},
		{"frame", p(OpProto, 4, OpFrame, u64(2), OpNewFalse, OpStop), Config{}, false},
		{"top at STOP", p(OpProto, 2, OpNone, OpNewTrue, OpStop), Config{}, true},
		{"global", p(OpProto, 2, OpGlobal, "m\nf\n", OpStop), Config{Objects: objects{}}, global("m.f")},
		{"stack global and reduce", p(OpProto, 4, OpShortBinUni, 1, "m", OpShortBinUni, 1, "f", OpStackGlobal, OpEmptyTuple, OpReduce, OpStop), Config{Objects: objects{}}, call{"m.f", tuple(nil)}},
		{"newobj", p(OpProto, 2, OpGlobal, "m\nC\n", OpEmptyTuple, OpNewObj, OpStop), Config{Objects: objects{}}, call{"m.C", tuple(nil)}},
		{"build", p(OpProto, 2, OpEmptyDict, OpNone, OpBuild, OpStop), Config{Objects: objects{}}, &dict{}},
		{"persistent id", p(OpProto, 2, OpNewTrue, OpBinPersID, OpStop), Config{Objects: objects{}}, pid{true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, d, err := decode(tc.in, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
			if d.Offset() != int64(len(tc.in)) {
				t.Errorf("Offset() = %d, want %d", d.Offset(), len(tc.in))
			}
		})
	}
}

// TestDecodeErrors feeds hostile and corrupt pickles: each fails with the
// message, the offset and the wrapped error given.
func TestDecodeErrors(t *testing.T) {
	deep := p(OpProto, 2, bytes.Repeat([]byte{OpMark}, 11), OpNone, OpStop)
	tests := []struct {
		name   string
		in     []byte
		cfg    Config
		msg    string
		offset int64 // -1: not checked
		is     error
	}{
		{"empty", nil, Config{}, "input ends early", 0, io.ErrUnexpectedEOF},
		{"cut after proto", p(OpProto), Config{}, "input ends early", 0, io.ErrUnexpectedEOF},
		{"no STOP", p(OpProto, 2, OpNone), Config{}, "input ends early", 3, io.ErrUnexpectedEOF},
		{"unknown opcode", p(OpProto, 2, 0xff), Config{}, "unknown opcode 0xff", 2, nil},
		{"protocol 6", p(OpProto, 6), Config{}, "unsupported protocol 6", 0, nil},
		{"protocol 1 below MinProto", p(OpProto, 1), Config{MinProto: 2}, "unsupported protocol 1", 0, nil},
		{"STOP on empty", p(OpProto, 2, OpStop), Config{}, "STOP with an empty stack", 2, nil},
		{"STOP in a MARK", p(OpProto, 2, OpNone, OpMark, OpStop), Config{}, "open MARK", 4, nil},
		{"two values, SingleValue", p(OpProto, 2, OpNone, OpNone, OpStop), Config{SingleValue: true}, "STOP with 2 values", 4, nil},
		{"pop mark without mark", p(OpProto, 2, OpPopMark), Config{}, "no MARK", 2, nil},
		{"pop empty", p(OpProto, 2, OpPop), Config{}, "no MARK", 2, nil},
		{"dup empty", p(OpProto, 2, OpDup), Config{}, "stack empty", 2, nil},
		{"tuple3 short", p(OpProto, 2, OpNone, OpTuple3), Config{}, "TUPLE3 with only 1 items", 3, nil},
		{"mark hides stack", p(OpProto, 2, OpNone, OpMark, OpTuple1), Config{}, "TUPLE1 with only 0 items", 4, nil},
		{"dict odd", p(OpProto, 2, OpMark, OpNone, OpDict), Config{}, "DICT with an odd number", 4, nil},
		{"setitems odd", p(OpProto, 2, OpEmptyDict, OpMark, OpNone, OpSetItems), Config{}, "SETITEMS with an odd number", 5, nil},
		{"setitem short", p(OpProto, 2, OpEmptyDict, OpNone, OpSetItem), Config{}, "SETITEM without a dict", 4, nil},
		{"append short", p(OpProto, 2, OpEmptyList, OpMark, OpNone, OpAppend), Config{}, "APPEND without a list", 5, nil},
		{"appends without list", p(OpProto, 2, OpMark, OpAppends), Config{}, "APPENDS without a list", 3, nil},
		{"memo unset", p(OpProto, 2, OpBinGet, 7), Config{}, "memo entry 7 used before it was set", 2, nil},
		{"memo put empty", p(OpProto, 2, OpBinPut, 0), Config{}, "stack empty", 2, nil},
		{"memo index above MaxMemo", p(OpProto, 2, OpNone, OpLongBinPut, u32(1<<20)), Config{MaxMemo: 1 << 20}, "memo index 1048576 above", 3, nil},
		{"memoize above MaxMemo", p(OpProto, 4, OpNone, OpMemoize, OpMemoize, OpMemoize), Config{MaxMemo: 2}, "more than 2 memo entries", 5, nil},
		{"MARKs above MaxMarks", deep, Config{MaxMarks: 10}, "more than 10 nested MARKs", 12, nil},
		{"huge string", p(OpProto, 4, OpBinUnicode8, u64(1<<62), "short"), Config{}, "input ends early", 2, io.ErrUnexpectedEOF},
		{"huge string, known size", p(OpProto, 4, OpBinUnicode8, u64(1<<62), "short"), Config{Size: 16}, "string of 4611686018427387904 bytes in a pickle with 5 bytes left", 2, nil},
		{"huge LONG4, known size", p(OpProto, 4, OpLong4, u32(math.MaxInt32), "short"), Config{Size: 12}, "int of 2147483647 bytes in a pickle with 5 bytes left", 2, nil},
		{"negative LONG4", p(OpProto, 2, OpLong4, u32(math.MaxUint32)), Config{}, "LONG4 with negative length -1", 2, nil},
		{"negative BINSTRING", p(OpProto, 2, OpBinString, u32(math.MaxUint32)), Config{}, "BINSTRING with negative length -1", 2, nil},
		{"huge frame", p(OpProto, 4, OpFrame, u64(1<<62)), Config{}, "input ends early", 11, io.ErrUnexpectedEOF},
		{"bytearray8 without Buffers", p(OpProto, 5, OpByteArray8, u64(0)), Config{}, "unsupported opcode BYTEARRAY8", 2, nil},
		{"readonly buffer without Buffers", p(OpProto, 5, OpNone, OpReadOnlyBuffer), Config{}, "unsupported opcode READONLY_BUFFER", 3, nil},
		{"protocol 0 text", p(OpProto, 2, "I1\n"), Config{}, "INT (protocol 0 text)", 2, nil},
		{"global without Objects", p(OpProto, 2, OpGlobal, "os\nsystem\n"), Config{}, "GLOBAL", 2, nil},
		{"reduce without Objects", p(OpProto, 2, OpNone, OpNone, OpReduce), Config{}, "REDUCE", 4, nil},
		{"persistent id without Objects", p(OpProto, 2, OpNone, OpBinPersID), Config{}, "BINPERSID", 3, nil},
		{"global without newline", p(OpProto, 2, OpGlobal, strings.Repeat("x", 300), "\n"), Config{Objects: objects{}}, "GLOBAL without a newline", 2, nil},
		{"stack global of ints", p(OpProto, 4, OpBinInt1, 1, OpBinInt1, 2, OpStackGlobal), Config{Objects: objects{}}, "not two strings", 6, nil},
		{"reduce on empty stack", p(OpProto, 2, OpNone, OpReduce), Config{Objects: objects{}}, "stack empty", 3, nil},
		{"str not UTF-8, StrictUTF8", p(OpProto, 4, OpShortBinUni, 3, "\xed\xb3\xbf", OpStop), Config{StrictUTF8: true}, "str of 3 bytes that is not valid UTF-8", 2, nil},
		{"long str not UTF-8, StrictUTF8", p(OpProto, 4, OpBinUnicode8, u64(2<<20), strings.Repeat("a", 2<<20-1), "\xff", OpStop), Config{StrictUTF8: true}, "not valid UTF-8", 2, nil},
		{"BINSTRING not UTF-8, StrictUTF8", p(OpProto, 2, OpShortBinString, 1, "\xff", OpStop), Config{StrictUTF8: true}, "not valid UTF-8", 2, nil},
		{"build on empty stack", p(OpProto, 2, OpMark, OpNone, OpBuild), Config{Objects: objects{}}, "stack empty", 4, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := decode(tc.in, tc.cfg)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %q, want it to contain %q", err, tc.msg)
			}
			if tc.offset >= 0 && pe.Offset != tc.offset {
				t.Errorf("Offset = %d, want %d", pe.Offset, tc.offset)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want it to wrap %v", err, tc.is)
			}
		})
	}
}

// TestUnsupportedClass checks that a refused GLOBAL or STACK_GLOBAL names
// its class, printable and cut, without consuming it.
func TestUnsupportedClass(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"global", p(OpProto, 2, OpGlobal, "collections\nOrderedDict\n"), "collections.OrderedDict"},
		{"stack global", p(OpProto, 4, OpShortBinUni, 2, "os", OpShortBinUni, 6, "system", OpStackGlobal), "os.system"},
		{"control characters", p(OpProto, 2, OpGlobal, "os\x1b[2J\nsystem\n"), "os?[2J.system"},
		{"no newline", p(OpProto, 2, OpGlobal, "os"), ""},
		{"not utf-8", p(OpProto, 2, OpGlobal, "o\xff\nx\n"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := decode(tc.in, Config{})
			var ue *UnsupportedError
			if !errors.As(err, &ue) || ue.Class != tc.want {
				t.Fatalf("err = %v, want an UnsupportedError naming %q", err, tc.want)
			}
		})
	}
}

// TestBuilderErrors checks that errors of the Builder and of Objects come
// back as they are, with the failing opcode's offset at hand.
func TestBuilderErrors(t *testing.T) {
	tests := []struct {
		name   string
		in     []byte
		msg    string
		offset int64
	}{
		{"append to a tuple", p(OpProto, 2, OpEmptyTuple, OpNone, OpAppend), "append to a pickle.tuple", 4},
		{"setitem on a list", p(OpProto, 2, OpEmptyList, OpNone, OpNone, OpSetItem), "setitems on a *pickle.list", 5},
		{"call of None", p(OpProto, 2, OpNone, OpEmptyTuple, OpReduce), "call of a non-global", 4},
		{"build of a list", p(OpProto, 2, OpEmptyList, OpNone, OpBuild), "build of a non-dict", 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, d, err := decode(tc.in, Config{Objects: objects{}})
			var pe *Error
			if err == nil || errors.As(err, &pe) || err.Error() != tc.msg {
				t.Fatalf("err = %v, want the builder's %q", err, tc.msg)
			}
			if d.OpOffset() != tc.offset {
				t.Errorf("OpOffset() = %d, want %d", d.OpOffset(), tc.offset)
			}
		})
	}
}

// TestBudget checks that pickles whose values take far more memory than
// their bytes fail once Used passes the budget, having allocated about
// that much.
func TestBudget(t *testing.T) {
	const budget = 8 << 20
	repeat := func(head, body string, n int) []byte {
		return p(OpProto, 4, head, bytes.Repeat([]byte(body), n), OpStop)
	}
	tests := []struct {
		name string
		in   []byte
	}{
		{"Nones on the stack", repeat("", "N", 2_000_000)},
		{"empty lists", repeat("", "]", 1_000_000)},
		{"DUP", repeat("N", "2", 2_000_000)},
		{"memo GET", repeat("]q\x00", "h\x00", 1_000_000)},
		{"open MARKs", repeat("", "(", 2_000_000)},
		{"memoize", repeat("N", "\x94", 2_000_000)},
		{"sparse memo", repeat("N", "r\x00\x00\x00\x00", 0)},
	}
	// sparse memo: PUT at ever new indices, into the map.
	var sparse []byte
	sparse = append(sparse, OpProto, 4, OpNone)
	for i := range 400_000 {
		sparse = append(append(sparse, OpLongBinPut), u32(uint32(i)*7+1)...)
	}
	tests[len(tests)-1].in = append(sparse, OpStop)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			_, _, err = decode(tc.in, Config{Budget: func(int64) int64 { return budget }})
			runtime.ReadMemStats(&ms1)
			var be *BudgetError
			if !errors.As(err, &be) || be.Used <= budget {
				t.Fatalf("err = %v, want a BudgetError above %d", err, budget)
			}
			if n := ms1.TotalAlloc - ms0.TotalAlloc; n > 3*budget {
				t.Errorf("allocated %d MB for a budget of %d MB", n>>20, budget>>20)
			}
		})
	}
}

// TestLargeData reads strings and bytes longer than the read buffer, in
// pieces, and checks that a length field alone allocates nothing.
func TestLargeData(t *testing.T) {
	s := strings.Repeat("x", 3<<20)
	for _, op := range []byte{OpBinUnicode8, OpBinBytes8} {
		v, _, err := decode(p(OpProto, 4, op, u64(uint64(len(s))), s, OpStop), Config{})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%s", v); got != s {
			t.Errorf("opcode 0x%02x: %d bytes read back differ", op, len(s))
		}
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	_, _, err := decode(p(OpProto, 4, OpBinBytes8, u64(1<<40), "short"), Config{})
	runtime.ReadMemStats(&ms1)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v", err)
	}
	if n := ms1.TotalAlloc - ms0.TotalAlloc; n > 4<<20 {
		t.Errorf("a declared length of 1 TiB allocated %d MB", n>>20)
	}
}

// TestMemoChunks checks memo entries on both sides of the first chunk's
// end, which grows by appending while the later ones do not.
func TestMemoChunks(t *testing.T) {
	const n = MemoChunk + 100
	b := p(OpProto, 4)
	for i := range n {
		b = append(b, OpBinInt, 0, 0, 0, 0)
		binary.LittleEndian.PutUint32(b[len(b)-4:], uint32(i))
		b = append(b, OpMemoize, OpPop)
	}
	idx := []int{0, 63, 64, MemoChunk - 1, MemoChunk, n - 1}
	b = append(b, OpMark)
	for _, i := range idx {
		b = append(append(b, OpLongBinGet), u32(uint32(i))...)
	}
	v, _, err := decode(append(b, OpTuple, OpStop), Config{})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := v.(tuple)
	if !ok || len(got) != len(idx) {
		t.Fatalf("got %#v", v)
	}
	for k, i := range idx {
		if got[k] != int64(i) {
			t.Errorf("memo entry %d = %v", i, got[k])
		}
	}
}
