package trace

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/vramgo/vram/internal/pickle"
)

// This file reads a PyTorch snapshot saved as JSON: json.dump of the dict
// torch.cuda.memory._snapshot() returns, or of the list of segments
// torch.cuda.memory_snapshot() returns. The JSON is decoded into the values
// the unpickler makes (unpickle.go), and the pickle's converter maps them,
// so that the JSON reads as the pickle of the same dict. JSON arrays become
// *pyList (json.dump writes tuples as arrays too), objects *pyDict,
// integers int64, or uint64 above MaxInt64, or pyBigInt beyond 64 bits,
// as a pickle's ints do; other numbers float64. The decoder never recurses,
// bounds nesting as encoding/json does, and counts the memory of the values
// it builds against the budget of a pickle of the same size.

// jsonMaxDepth bounds the nesting of arrays and objects, as encoding/json
// bounds that of the values it decodes.
const jsonMaxDepth = 10000

// jsonInternMax is the longest string that the decoder interns: keys,
// file names and short values repeat in every entry of a snapshot.
const jsonInternMax = 64

// jsonFlatMax is the most keys of an object of scalars that the decoder
// makes one value of however often it occurs: PyTorch shares one frame
// dict among the stacks that hold it, which json.dump writes out each
// time; sharing them again lets the converter share the stacks.
const jsonFlatMax = 8

// Heap bytes of the decoder's bookkeeping, for its count of memory.
const (
	sizeofString   = int64(unsafe.Sizeof(""))
	sizeofMapEntry = 2 * sizeofAny // a map's overhead per entry, about
	sizeofOpen     = int64(unsafe.Sizeof(jsonOpen{}))
	sizeofBoxed    = 8 // an int64 or float64 in an interface
)

// readTorchJSON reads a PyTorch snapshot saved as JSON with jv, whose
// dec has UseNumber set. With held nil, dec has read the '[' that opens a
// list of segments, and the list is read from dec; otherwise dec has read
// a whole object without a "format" key, and held are the values of its
// keys: "device_traces" and "allocator_settings" decoded, "segments" as
// it was read. Either way the input must end with the JSON value.
func readTorchJSON(dec *json.Decoder, held []heldValue, jv *jsonValues) ([]*Snapshot, error) {
	var root any
	if held == nil {
		v, err := jv.decode(dec, 0, json.Delim('['))
		if err != nil {
			return nil, err
		}
		if err := jsonEnd(dec); err != nil {
			return nil, &ParseError{Kind: KindPyTorchJSON, Offset: dec.InputOffset(), Err: err}
		}
		root = v
	} else {
		if err := jsonEnd(dec); err != nil {
			return nil, &ParseError{Kind: KindJSON, Offset: dec.InputOffset(), Err: err}
		}
		jv.size = dec.InputOffset()
		d := &pyDict{}
		for i := range held {
			h := &held[i]
			switch {
			case h.decoded:
				d.kv = append(d.kv, h.key, h.v)
			case h.key == "segments":
				sub := json.NewDecoder(bytes.NewReader(h.raw))
				sub.UseNumber()
				tok, err := sub.Token()
				if err != nil { // the value was read whole: not reached
					return nil, jv.syntaxError(sub, h.off, err)
				}
				v, err := jv.decode(sub, h.off, tok)
				if err != nil {
					return nil, err
				}
				d.kv = append(d.kv, h.key, v)
			}
			jv.used -= int64(len(h.raw))
			h.raw = nil
		}
		jv.used += sizeofDict + pickle.GrownBytes(0, cap(d.kv), sizeofAny)
		root = d
	}
	size := jv.size
	if size == 0 {
		size = dec.InputOffset()
	}
	c := &pickleConverter{budget: pickleBudget(size) - jv.used, stacks: make(map[string][]Frame)}
	snaps, err := c.convert(root)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) && pe.Kind == KindPickle {
			e := *pe
			e.Kind = KindPyTorchJSON
			if held == nil && e.Msg != "" {
				e.Msg = "a JSON array, read as the list of segments of torch.cuda.memory_snapshot(): " + e.Msg
			}
			err = &e
		}
		return nil, err
	}
	return snaps, nil
}

// newJSONValues returns a decoder of JSON values with nothing read.
func newJSONValues() *jsonValues {
	return &jsonValues{strs: make(map[string]any), flat: make(map[string]*pyDict)}
}

// jsonValues decodes JSON into the values of unpickle.go, counting their
// memory as the unpickler counts its own.
type jsonValues struct {
	used  int64 // memory of the values built, by the count of unpickle.go
	size  int64 // bytes of input, when all of it has been read; else 0
	stack []any // the items of the open arrays and objects
	open  []jsonOpen
	strs  map[string]any     // interned strings, boxed once
	flat  map[string]*pyDict // objects of scalars by their content
	key   []byte             // scratch for flat's keys
}

// jsonOpen is an array or object being read: its items start at
// stack[start].
type jsonOpen struct {
	start  int
	object bool
}

// decode reads the JSON value that starts with tok from dec, whose input
// starts at offset base of the whole input.
func (jv *jsonValues) decode(dec *json.Decoder, base int64, tok json.Token) (any, error) {
	for {
		var v any
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '[', '{':
				if len(jv.open) == jsonMaxDepth {
					return nil, &ParseError{Kind: KindPyTorchJSON, Offset: base + dec.InputOffset(),
						Msg: fmt.Sprintf("exceeded max depth: arrays and objects nested more than %d deep", jsonMaxDepth)}
				}
				c := cap(jv.open)
				jv.open = append(jv.open, jsonOpen{start: len(jv.stack), object: t == '{'})
				jv.used += pickle.GrownBytes(c, cap(jv.open), sizeofOpen)
			default: // ']' or '}'
				o := jv.open[len(jv.open)-1]
				jv.open = jv.open[:len(jv.open)-1]
				var items []any
				if n := len(jv.stack) - o.start; n > 0 {
					items = make([]any, n)
					copy(items, jv.stack[o.start:])
					clear(jv.stack[o.start:])
					jv.stack = jv.stack[:o.start]
					jv.used += sizeofAny * int64(n)
				}
				if o.object {
					v = jv.object(items)
				} else {
					v = &pyList{items: items}
					jv.used += sizeofList
				}
			}
		case string:
			v = jv.intern(tok)
		case json.Number:
			v = jv.number(t)
		case bool, nil:
			v = tok
		}
		if _, ok := tok.(json.Delim); !ok || v != nil {
			if len(jv.open) == 0 {
				return v, nil
			}
			c := cap(jv.stack)
			jv.stack = append(jv.stack, v)
			jv.used += pickle.GrownBytes(c, cap(jv.stack), sizeofAny)
		}
		read := jv.size
		if read == 0 {
			read = base + dec.InputOffset()
		}
		if jv.used > pickleBudget(read) {
			return nil, &ParseError{Kind: KindPyTorchJSON, Offset: base + dec.InputOffset(),
				Err: &LimitError{Limit: pickleExpansion, Pickle: true, Used: jv.used, Read: read, json: true}}
		}
		var err error
		if tok, err = dec.Token(); err != nil {
			return nil, jv.syntaxError(dec, base, err)
		}
	}
}

// syntaxError is the *ParseError of err, a failure of dec to read a token.
func (jv *jsonValues) syntaxError(dec *json.Decoder, base int64, err error) error {
	var le *LimitError
	if errors.As(err, &le) {
		return &ParseError{Kind: KindPyTorchJSON, Offset: base + dec.InputOffset(), Err: err}
	}
	return &ParseError{Kind: KindPyTorchJSON, Offset: base + dec.InputOffset(), Err: jsonErr(err)}
}

// intern returns the string s boxed in tok, the box of an equal string
// read before when s is short, so that a key read a million times takes
// memory once.
func (jv *jsonValues) intern(tok any) any {
	s, _ := tok.(string)
	if len(s) > jsonInternMax {
		jv.used += sizeofString + int64(len(s))
		return tok
	}
	if v, ok := jv.strs[s]; ok {
		return v
	}
	jv.strs[s] = tok
	jv.used += 2*sizeofString + int64(len(s)) + sizeofMapEntry
	return tok
}

// number converts a JSON number as a pickle holds the Python number that
// json.dump wrote: an integer without fraction or exponent, as int64,
// uint64 above MaxInt64, or pyBigInt beyond 64 bits; else a float64
// (beyond its range, an infinity, as Python reads it).
func (jv *jsonValues) number(n json.Number) any {
	s := string(n)
	if strings.ContainsAny(s, ".eE") {
		f, _ := strconv.ParseFloat(s, 64)
		jv.used += sizeofBoxed
		return f
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		if i < 0 || i > 255 { // 0 to 255 take no memory in an interface
			jv.used += sizeofBoxed
		}
		return i
	}
	if s[0] != '-' {
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			jv.used += sizeofBoxed
			return u
		}
	}
	return pyBigInt{}
}

// object makes the dict of the alternating keys and values kv. An object
// of a few scalars is made once for all the objects equal to it.
func (jv *jsonValues) object(kv []any) *pyDict {
	if len(kv) > 2*jsonFlatMax {
		jv.used += sizeofDict
		return &pyDict{kv: kv}
	}
	k := jv.key[:0]
	for _, v := range kv {
		switch v := v.(type) {
		case nil:
			k = append(k, 'N')
		case bool:
			k = append(k, 'b')
			if v {
				k = append(k, 1)
			} else {
				k = append(k, 0)
			}
		case int64:
			k = binary.AppendVarint(append(k, 'i'), v)
		case uint64:
			k = binary.AppendUvarint(append(k, 'u'), v)
		case float64:
			k = binary.LittleEndian.AppendUint64(append(k, 'f'), math.Float64bits(v))
		case pyBigInt:
			k = append(k, 'B')
		case string:
			k = binary.AppendUvarint(append(k, 's'), uint64(len(v)))
			k = append(k, v...)
		default: // an array or object: not flat
			jv.key = k
			jv.used += sizeofDict
			return &pyDict{kv: kv}
		}
	}
	jv.key = k
	if d, ok := jv.flat[string(k)]; ok {
		jv.used -= sizeofAny * int64(len(kv)) // kv is dropped
		return d
	}
	d := &pyDict{kv: kv}
	jv.flat[string(k)] = d
	jv.used += sizeofDict + sizeofString + int64(len(k)) + sizeofMapEntry
	return d
}
