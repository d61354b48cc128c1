package torchload

import (
	"fmt"
	"strings"
)

// elemType is an element type of a torch storage or tensor.
type elemType struct {
	name string // torch's dtype name: "float32", "bfloat16", ...
	size int64  // bytes per element
	// st is the safetensors name of the same values ("F32", "U16"),
	// which package nn decodes; "" for a dtype safetensors has not.
	st string
}

// The element types of torch.save files. Those that [vramDType] maps are
// read; the others are known, so that a file holding one is decoded, and
// a tensor of one is an error matching vram.ErrDType only when it is
// used.
var (
	tFloat32  = elemType{"float32", 4, "F32"}
	tFloat64  = elemType{"float64", 8, "F64"}
	tFloat16  = elemType{"float16", 2, "F16"}
	tBFloat16 = elemType{"bfloat16", 2, "BF16"}
	tInt64    = elemType{"int64", 8, "I64"}
	tInt32    = elemType{"int32", 4, "I32"}
	tInt16    = elemType{"int16", 2, "I16"}
	tInt8     = elemType{"int8", 1, "I8"}
	tUint8    = elemType{"uint8", 1, "U8"}
	tBool     = elemType{"bool", 1, "BOOL"}
	tUint16   = elemType{"uint16", 2, "U16"}
	tUint32   = elemType{"uint32", 4, "U32"}
	tUint64   = elemType{"uint64", 8, "U64"}

	tComplex32  = elemType{"complex32", 4, ""}
	tComplex64  = elemType{"complex64", 8, ""}
	tComplex128 = elemType{"complex128", 16, ""}
	tF8E4M3FN   = elemType{"float8_e4m3fn", 1, ""}
	tF8E5M2     = elemType{"float8_e5m2", 1, ""}
	tF8E4M3FNUZ = elemType{"float8_e4m3fnuz", 1, ""}
	tF8E5M2FNUZ = elemType{"float8_e5m2fnuz", 1, ""}
	tF8E8M0FNU  = elemType{"float8_e8m0fnu", 1, ""}
	tF4E2M1FNx2 = elemType{"float4_e2m1fn_x2", 1, ""}
	tQInt8      = elemType{"qint8", 1, ""}
	tQUInt8     = elemType{"quint8", 1, ""}
	tQInt32     = elemType{"qint32", 4, ""}
	tQUInt4x2   = elemType{"quint4x2", 1, ""}
	tQUInt2x4   = elemType{"quint2x4", 1, ""}
	tBits8      = elemType{"bits8", 1, ""}
	tBits16     = elemType{"bits16", 2, ""}
	tBits1x8    = elemType{"bits1x8", 1, ""}
	tBits2x4    = elemType{"bits2x4", 1, ""}
	tBits4x2    = elemType{"bits4x2", 1, ""}
)

// storageClasses maps the storage classes torch.save names in persistent
// ids to their element types. torch.UntypedStorage holds bytes; the
// tensor's dtype then comes from _rebuild_tensor_v3, as PyTorch 2 writes
// the dtypes that have no storage class of their own (the 8-bit floats,
// uint16, uint32, uint64, complex32).
var storageClasses = map[string]elemType{
	"FloatStorage":    tFloat32,
	"DoubleStorage":   tFloat64,
	"HalfStorage":     tFloat16,
	"BFloat16Storage": tBFloat16,
	"LongStorage":     tInt64,
	"IntStorage":      tInt32,
	"ShortStorage":    tInt16,
	"CharStorage":     tInt8,
	"ByteStorage":     tUint8,
	"BoolStorage":     tBool,
	"UntypedStorage":  tUint8,

	"ComplexFloatStorage":  tComplex64,
	"ComplexDoubleStorage": tComplex128,
	"QInt8Storage":         tQInt8,
	"QUInt8Storage":        tQUInt8,
	"QInt32Storage":        tQInt32,
	"QUInt4x2Storage":      tQUInt4x2,
	"QUInt2x4Storage":      tQUInt2x4,
}

// dtypes maps the names of the torch.dtype globals (torch.float32 and its
// aliases) to their element types.
var dtypes = map[string]elemType{
	"float32": tFloat32, "float": tFloat32,
	"float64": tFloat64, "double": tFloat64,
	"float16": tFloat16, "half": tFloat16,
	"bfloat16": tBFloat16,
	"int64":    tInt64, "long": tInt64,
	"int32": tInt32, "int": tInt32,
	"int16": tInt16, "short": tInt16,
	"int8":  tInt8,
	"uint8": tUint8,
	"bool":  tBool,

	"uint16": tUint16, "uint32": tUint32, "uint64": tUint64,
	"complex32": tComplex32, "chalf": tComplex32,
	"complex64": tComplex64, "cfloat": tComplex64,
	"complex128": tComplex128, "cdouble": tComplex128,
	"float8_e4m3fn": tF8E4M3FN, "float8_e5m2": tF8E5M2,
	"float8_e4m3fnuz": tF8E4M3FNUZ, "float8_e5m2fnuz": tF8E5M2FNUZ,
	"float8_e8m0fnu": tF8E8M0FNU, "float4_e2m1fn_x2": tF4E2M1FNx2,
	"qint8": tQInt8, "quint8": tQUInt8, "qint32": tQInt32,
	"quint4x2": tQUInt4x2, "quint2x4": tQUInt2x4,
	"bits8": tBits8, "bits16": tBits16, "bits1x8": tBits1x8, "bits2x4": tBits2x4, "bits4x2": tBits4x2,
}

// qschemes are the torch.qscheme globals of a quantized tensor's
// quantizer parameters (torch.per_tensor_affine, ...).
var qschemes = map[string]bool{
	"per_tensor_affine": true, "per_channel_affine": true, "per_tensor_symmetric": true,
	"per_channel_symmetric": true, "per_channel_affine_float_qparams": true,
}

// Functions and classes of the allowlist (beside the storage classes and
// dtypes of package torch).
const (
	gOrderedDict     = "collections.OrderedDict"
	gRebuildV2       = "torch._utils._rebuild_tensor_v2"
	gRebuildV3       = "torch._utils._rebuild_tensor_v3"
	gRebuildParam    = "torch._utils._rebuild_parameter"
	gRebuildParamSt  = "torch._utils._rebuild_parameter_with_state"
	gRebuildQTensor  = "torch._utils._rebuild_qtensor"
	gTorchSize       = "torch.Size"
	gSet             = "builtins.set"
	gFrozenSet       = "builtins.frozenset"
	gDict            = "builtins.dict"
	gList            = "builtins.list"
	gTuple           = "builtins.tuple"
	gRebuildFromType = "torch._tensor._rebuild_from_type_v2"
	gTensor          = "torch.Tensor"
	gParameter       = "torch.nn.parameter.Parameter"
	gDevice          = "torch.device"
	gEncode          = "_codecs.encode"
)

// allowed lists the functions and classes a state dict's pickle may name.
var allowed = map[string]bool{
	gOrderedDict: true, gRebuildV2: true, gRebuildV3: true, gRebuildParam: true,
	gRebuildParamSt: true, gRebuildQTensor: true, gTorchSize: true, gSet: true, gFrozenSet: true,
	gDict: true, gList: true, gTuple: true, gRebuildFromType: true,
	gTensor: true, gParameter: true, gDevice: true, gEncode: true,
}

// global resolves module.name against the allowlist. Python 2 names that
// protocol 2 writes (__builtin__) read as Python 3's.
func (d *decoder) global(module, name string) (any, error) {
	if module == "__builtin__" {
		module = "builtins"
	}
	if module == "torch" {
		if _, ok := storageClasses[name]; ok {
			return global{module, name}, nil
		}
		if _, ok := dtypes[name]; ok {
			return dtypeName(name), nil
		}
		if qschemes[name] {
			return global{module, name}, nil
		}
	}
	g := global{module, name}
	if !allowed[g.String()] {
		return nil, &GlobalError{Module: printable(module), Name: printable(name), Offset: d.opPos()}
	}
	return g, nil
}

// call applies fn, a global of the allowlist, to args (REDUCE or NEWOBJ).
func (d *decoder) call(fn, args any) (any, error) {
	g, ok := fn.(global)
	if !ok {
		return nil, d.errorf("call of a %s, not a function of the allowlist", typeName(fn))
	}
	a, ok := args.(tuple)
	if !ok {
		return nil, d.errorf("call of %s with a %s, not a tuple of arguments", g, typeName(args))
	}
	switch g.String() {
	case gOrderedDict, gDict:
		m := &dict{}
		if len(a) == 0 {
			return m, nil
		}
		if len(a) == 1 {
			if src, ok := a[0].(*dict); ok {
				for i := range src.keys {
					m.set(src.keys[i], src.vals[i])
				}
				return m, nil
			}
			if src, ok := a[0].(*list); ok {
				for _, kv := range src.items {
					p, ok := kv.(tuple)
					if !ok || len(p) != 2 {
						return nil, d.errorf("%s of a list holding a %s, not a pair", g, typeName(kv))
					}
					m.set(p[0], p[1])
				}
				return m, nil
			}
		}
		return nil, d.errorf("%s with %d arguments", g, len(a))
	case gSet, gFrozenSet, gList, gTuple, gTorchSize:
		var items []any
		switch {
		case len(a) == 0:
		case len(a) == 1:
			switch src := a[0].(type) {
			case *list:
				items = append(items, src.items...)
			case tuple:
				items = append(items, src...)
			default:
				return nil, d.errorf("%s of a %s", g, typeName(a[0]))
			}
		default:
			return nil, d.errorf("%s with %d arguments", g, len(a))
		}
		if g.String() == gTuple || g.String() == gTorchSize {
			return tuple(items), nil
		}
		return &list{items: items}, nil
	case gDevice:
		// torch.device("cuda", 0) or torch.device("cuda:0"): its name.
		if len(a) == 0 || len(a) > 2 {
			return nil, d.errorf("%s with %d arguments", g, len(a))
		}
		name, ok := a[0].(string)
		if !ok {
			return nil, d.errorf("%s of a %s", g, typeName(a[0]))
		}
		if len(a) == 2 {
			i, ok := a[1].(int64)
			if !ok {
				return nil, d.errorf("%s with an index of type %s", g, typeName(a[1]))
			}
			name += ":" + fmtAny(i)
		}
		return name, nil
	case gEncode:
		// Protocol 2 pickles a bytes object b as
		// _codecs.encode(b.decode("latin1"), "latin1").
		if len(a) != 2 || a[1] != "latin1" {
			return nil, d.errorf("%s with arguments other than (str, 'latin1')", g)
		}
		s, ok := a[0].(string)
		if !ok {
			return nil, d.errorf("%s of a %s", g, typeName(a[0]))
		}
		b := make([]byte, 0, len(s))
		for _, r := range s {
			if r > 0xff {
				return nil, d.errorf("%s of a character above U+00FF", g)
			}
			b = append(b, byte(r))
		}
		return b, nil
	case gRebuildV2, gRebuildV3:
		return d.rebuildTensor(g, a)
	case gRebuildQTensor:
		// (storage, storage_offset, size, stride, quantizer_params,
		// requires_grad, backward_hooks): a view of a quantized storage,
		// known and not read, as its dtype is.
		if len(a) != 7 {
			return nil, d.errorf("%s with %d arguments", g, len(a))
		}
		return d.rebuildTensor(g, tuple{a[0], a[1], a[2], a[3], a[5], a[6]})
	case gRebuildParam, gRebuildParamSt:
		// (data, requires_grad, backward_hooks[, state])
		if len(a) < 3 {
			return nil, d.errorf("%s with %d arguments", g, len(a))
		}
		t, ok := a[0].(*tensorRef)
		if !ok {
			return nil, d.errorf("%s of a %s, not a tensor", g, typeName(a[0]))
		}
		return t, nil
	case gRebuildFromType:
		// (func, type, args, state): a tensor's reduction when it has
		// attributes; only plain tensors and parameters are read.
		if len(a) != 4 {
			return nil, d.errorf("%s with %d arguments", g, len(a))
		}
		if typ, ok := a[1].(global); !ok || (typ.String() != gTensor && typ.String() != gParameter) {
			return nil, d.errorf("%s of the type %s: only torch.Tensor and torch.nn.Parameter are read", g, typeName(a[1]))
		}
		return d.call(a[0], a[2])
	}
	return nil, d.errorf("%s cannot be called", g)
}

// rebuildTensor is torch._utils._rebuild_tensor_v2(storage, storage_offset,
// size, stride, requires_grad, backward_hooks[, metadata]) and
// _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad,
// backward_hooks, dtype[, metadata]). It checks the view against the
// storage's declared size, so that reading it later stays in bounds.
func (d *decoder) rebuildTensor(g global, a tuple) (*tensorRef, error) {
	v3 := g.String() == gRebuildV3
	want := 6
	if v3 {
		want = 7
	}
	if len(a) < want || len(a) > want+1 {
		return nil, d.errorf("%s with %d arguments", g, len(a))
	}
	st, ok := a[0].(*storage)
	if !ok {
		return nil, d.errorf("%s of a %s, not a storage", g, typeName(a[0]))
	}
	t := &tensorRef{st: st, dtype: st.dtype}
	if v3 {
		name, ok := a[6].(dtypeName)
		if !ok {
			return nil, d.errorf("%s with a dtype argument of type %s", g, typeName(a[6]))
		}
		t.dtype = dtypes[string(name)] // global resolved only names of dtypes
	}
	off, ok := a[1].(int64)
	if !ok || off < 0 {
		return nil, d.errorf("%s with storage offset %s", g, repr(a[1]))
	}
	t.offset = off
	var err error
	if t.size, err = d.ints(g, "size", a[2]); err != nil {
		return nil, err
	}
	if t.stride, err = d.ints(g, "stride", a[3]); err != nil {
		return nil, err
	}
	if len(t.size) != len(t.stride) {
		return nil, d.errorf("%s with size %v and stride %v of different lengths", g, t.size, t.stride)
	}
	if err := checkView(t); err != nil {
		return nil, d.errorf("%s: %v", g, err)
	}
	return t, nil
}

// ints converts a size or stride tuple of non-negative ints.
func (d *decoder) ints(g global, what string, v any) ([]int64, error) {
	t, ok := v.(tuple)
	if !ok {
		return nil, d.errorf("%s with a %s of type %s", g, what, typeName(v))
	}
	if len(t) > maxDims {
		return nil, d.errorf("%s with %d dimensions (at most %d)", g, len(t), maxDims)
	}
	out := make([]int64, len(t))
	for i, x := range t {
		n, ok := x.(int64)
		if !ok || n < 0 {
			return nil, d.errorf("%s with %s %s", g, what, repr(v))
		}
		out[i] = n
	}
	return out, nil
}

// persistent resolves the persistent id pid, ('storage', storage_type,
// key, location, numel), to the storage of the archive entry data/<key>.
// The same key always gives the same storage.
func (d *decoder) persistent(pid any) (*storage, error) {
	t, ok := pid.(tuple)
	if d.legacy && ok && len(t) == 6 {
		// The legacy format adds view metadata, None but for the
		// storage views of PyTorch before 0.4.
		if t[5] != nil {
			return nil, d.errorf("a storage view (PyTorch before 0.4) is not read")
		}
		t = t[:5]
	}
	if !ok || len(t) != 5 {
		return nil, d.errorf("persistent id %s, not ('storage', type, key, location, numel)", repr(pid))
	}
	if s, _ := t[0].(string); s != "storage" {
		return nil, d.errorf("persistent id of kind %s, not 'storage'", repr(t[0]))
	}
	class, ok := t[1].(global)
	if !ok || class.module != "torch" {
		return nil, d.errorf("storage of type %s", typeName(t[1]))
	}
	et, ok := storageClasses[class.name]
	if !ok {
		return nil, d.errorf("storage of type %s", class)
	}
	key, ok := t[2].(string)
	if !ok || key == "" || len(key) > maxLine || strings.ContainsAny(key, "/\\") || key == "." || key == ".." {
		return nil, d.errorf("storage key %s", repr(t[2]))
	}
	if _, ok := t[3].(string); !ok {
		return nil, d.errorf("storage location %s", repr(t[3]))
	}
	numel, ok := t[4].(int64)
	if !ok || numel < 0 {
		return nil, d.errorf("storage size %s", repr(t[4]))
	}
	if old, ok := d.storages[key]; ok {
		if old.numel != numel || old.dtype != et {
			return nil, d.errorf("storage %q declared as %d %s and as %d %s", key, old.numel, old.dtype.name, numel, et.name)
		}
		return old, nil
	}
	if numel > maxElems/et.size {
		return nil, d.errorf("storage %q of %d elements", key, numel)
	}
	s := &storage{key: key, dtype: et, numel: numel}
	d.storages[key] = s
	return s, nil
}

// maxElems bounds the sizes of storages and tensors, in bytes: 2^50, a
// thousand times any accelerator's memory, far enough from overflow that
// the products below cannot wrap.
const maxElems = 1 << 50

// checkView checks that every element of t lies within its storage, and
// that t's size in bytes stays below maxElems.
func checkView(t *tensorRef) error {
	if t.offset > maxElems {
		return fmt.Errorf("storage offset %d too large", t.offset)
	}
	// nz is the product of the sizes but zeros: a tensor of no elements
	// must still have a shape whose other sizes multiply within bounds,
	// as vram counts its elements so.
	n, nz := int64(1), int64(1)
	last := t.offset // the offset of t's last element, in elements
	for i, s := range t.size {
		if s == 0 {
			n = 0
			continue
		}
		if s > maxElems/nz {
			return fmt.Errorf("size %v too large", t.size)
		}
		nz *= s
		if n != 0 {
			n *= s
		}
		if t.stride[i] > maxElems || (s-1) > 0 && t.stride[i] > maxElems/(s-1) {
			return fmt.Errorf("stride %v too large", t.stride)
		}
		last += (s - 1) * t.stride[i]
		if last > maxElems {
			return fmt.Errorf("view beyond any storage")
		}
	}
	if n > maxElems/t.dtype.size {
		return fmt.Errorf("size %v too large", t.size)
	}
	if n == 0 {
		return nil
	}
	// For an untyped storage (v3) numel counts bytes.
	stBytes := t.st.numel * t.st.dtype.size
	if (last+1)*t.dtype.size > stBytes {
		return fmt.Errorf("view of size %v, stride %v at offset %d needs %d bytes of storage %q, which has %d",
			t.size, t.stride, t.offset, (last+1)*t.dtype.size, t.st.key, stBytes)
	}
	return nil
}

// repr formats a small decoded value for a message.
func repr(v any) string { return reprDepth(v, 0) }

// maxReprDepth bounds the nesting of tuples that repr formats: a pickle
// can nest tuples a million deep in a few megabytes.
const maxReprDepth = 3

func reprDepth(v any, depth int) string {
	switch v := v.(type) {
	case string:
		return "'" + printable(v) + "'"
	case int64, float64, bool:
		return strings.TrimSpace(fmtAny(v))
	case tuple:
		if depth >= maxReprDepth {
			return "(...)"
		}
		parts := make([]string, 0, min(len(v), 8))
		for i, x := range v {
			if i == 8 {
				parts = append(parts, "...")
				break
			}
			parts = append(parts, reprDepth(x, depth+1))
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	return "a " + typeName(v)
}
