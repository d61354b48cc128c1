package nn

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	"github.com/vramgo/vram"
)

// Replicator is implemented by modules that make their own replicas, for
// what [Replicate]'s copy of their fields cannot know: a closure that
// captures tensors, a handle to something outside vram. Replicate calls it
// in place of copying the module (at the top or anywhere inside a model).
// An implementation must not call Replicate on the module itself.
type Replicator interface {
	// Replicate returns a copy of the module, of its type, whose
	// parameters and other tensors live on device d.
	Replicate(d vram.Device) (Module, error)
}

// Replicate returns a copy of m on device d: a module of the same type and
// structure whose parameters are new leaf tensors on d with m's values,
// dtypes and RequiresGrad, and no gradients. It is how data parallelism
// makes one replica per device, once. The copy shares nothing that can
// change with m: the replica and m train independently from then on.
//
// Modules built on [Base] replicate without code of their own, layers and
// users' structs alike (unexported fields too): Replicate copies the
// module's value and, recursively, everything in it that can hold tensors
// or modules: struct fields (embedded ones too), pointers, slices, arrays,
// maps, and interfaces that a module or a tensor can be stored in (such as
// Module or any; not io.Writer):
//
//   - every tensor reached (registered parameters, and tensors kept in
//     fields, vram's equivalent of PyTorch's buffers) is copied to d once,
//     so weights shared by two layers stay shared in the replica;
//   - a module or other pointer reached twice is copied once, so the
//     replica's [Base.NamedChildren] and a struct's own fields (such as
//     Sequential's list) name the same sub-modules;
//   - a parameter registered with [Base.RegisterParameterField] is the
//     replica's own field, so that assigning to the replica's field
//     changes the replica's parameter, not m's;
//   - a [vram.Device] value equal to the device that all of m's parameters
//     and buffers share is replaced by d, so that a module that makes tensors on its own
//     device in Forward keeps doing so;
//   - values that cannot hold tensors or modules (numbers, strings,
//     generators, functions such as [Func], channels, writers) are copied as
//     they are, shared where they are references.
//
// A module that implements [Replicator] is replicated by its own method
// instead. Functions are not looked into: a closure that captures tensors
// keeps the originals, and such a module should implement Replicator.
//
// Replicate returns an error for a nil module, an unavailable device, a
// released tensor in m, a Replicator's error or a nil module or one of
// another type in place of its replica, or a replica whose parameters or
// buffers do not match m's (names or shapes); nothing is left allocated
// on d then. m is only read,
// and must not change while Replicate runs. The replica's tensors are kept
// from enclosing [vram.Tidy] calls; release them with [Release].
func Replicate(m Module, d vram.Device) (Module, error) {
	if isNil(m) {
		return nil, fmt.Errorf("nn: replicate: nil module")
	}
	if err := d.Check(); err != nil {
		return nil, fmt.Errorf("nn: replicate %T to %v: %w", m, d, err)
	}
	r := &replicator{dev: d, tensors: map[*vram.Tensor]*vram.Tensor{}, ptrs: map[ptrKey]reflect.Value{}}
	r.src, r.srcOK = commonDevice(m)
	r.names = map[*vram.Tensor]string{}
	for _, p := range m.NamedParameters() {
		r.names[p.Tensor] = p.Name
	}
	var out Module
	err := vram.Catch(func() {
		vram.Region(ParametersRegion, func() {
			if rp, ok := m.(Replicator); ok {
				out, r.err = rp.Replicate(d)
				if r.err == nil && (out == nil || isNilModule(out) || reflect.TypeOf(out) != reflect.TypeOf(m)) {
					r.fail("Replicate of %T returned %T, want a non-nil %T", m, out, m)
				}
				return
			}
			v := reflect.ValueOf(&m).Elem() // the interface, addressable
			out = r.copy(v, "").Interface().(Module)
			r.rebindFields()
		})
	})
	if err == nil {
		err = r.err
	}
	if err == nil {
		err = checkReplica(m, out, d)
	}
	if err != nil {
		for _, t := range r.made {
			t.Release()
		}
		return nil, fmt.Errorf("nn: replicate %T to %v: %w", m, d, err)
	}
	return out, nil
}

// commonDevice returns the device of every tensor of m's parameters and
// buffers (a quantized model has buffers only), and whether there is
// exactly one.
func commonDevice(m Module) (vram.Device, bool) {
	var dev vram.Device
	found := false
	for _, p := range stateTensorsOf(m) {
		switch {
		case p == nil || p.Released():
			continue
		case !found:
			dev, found = p.Device(), true
		case p.Device() != dev:
			return vram.Device{}, false
		}
	}
	return dev, found
}

// stateTensorsOf returns the tensors of m's parameters, then of its
// buffers.
func stateTensorsOf(m Module) []*vram.Tensor {
	out := m.Parameters()
	for _, b := range NamedBuffers(m) {
		out = append(out, b.Tensor)
	}
	return out
}

// checkReplica returns an error unless rep has m's parameters and buffers,
// by name, shape and dtype, all on d, and none of them m's own.
func checkReplica(m, rep Module, d vram.Device) error {
	if err := checkReplicaTensors("parameter", m.NamedParameters(), rep.NamedParameters(), m, d); err != nil {
		return err
	}
	return checkReplicaTensors("buffer", NamedBuffers(m), NamedBuffers(rep), m, d)
}

// checkReplicaTensors is checkReplica for one kind of tensor ("parameter"
// or "buffer"): want are m's, got the replica's.
func checkReplicaTensors(kind string, want, got []NamedParameter, m Module, d vram.Device) error {
	if len(want) != len(got) {
		return fmt.Errorf("the replica has %d %ss and the module %d; implement nn.Replicator for %T", len(got), kind, len(want), m)
	}
	for i, w := range want {
		g := got[i]
		switch {
		case g.Name != w.Name:
			return fmt.Errorf("replica %s %d is %q, the module's is %q", kind, i, g.Name, w.Name)
		case g.Tensor == w.Tensor:
			return fmt.Errorf("%s %q is shared with the module, not copied; implement nn.Replicator for the module that holds it", kind, w.Name)
		case !slices.Equal(g.Tensor.Shape(), w.Tensor.Shape()) || g.Tensor.DType() != w.Tensor.DType():
			return fmt.Errorf("replica %s %q is %s %v, the module's is %s %v", kind, w.Name, g.Tensor.DType(), g.Tensor.Shape(), w.Tensor.DType(), w.Tensor.Shape())
		case g.Tensor.Device() != d:
			return fmt.Errorf("replica %s %q is on %v, not %v", kind, w.Name, g.Tensor.Device(), d)
		}
	}
	return nil
}

// replicator is the state of one Replicate call.
type replicator struct {
	dev     vram.Device
	src     vram.Device // the device all of the module's parameters and buffers share
	srcOK   bool        // whether there is one
	tensors map[*vram.Tensor]*vram.Tensor
	ptrs    map[ptrKey]reflect.Value
	names   map[*vram.Tensor]string // the module's parameters, for errors
	made    []*vram.Tensor          // released again if Replicate fails
	err     error                   // the first error; the walk stops adding work
	blocks  []block                 // the memory copied: structs behind pointers, slices' arrays
	slots   [][2][]paramSlot        // Bases' parameter lists, the module's and the replica's
}

// block is a span of the module's memory, size bytes from orig, that the
// replica holds a copy of at cp.
type block struct {
	orig, cp unsafe.Pointer
	size     uintptr
}

// rebindFields points each parameter of the replica registered with
// [Base.RegisterParameterField] at the replica's field: the walk copied
// the pointer to the module's field into a cell of its own, holding the
// right tensor but no longer the field, so that assigning to the
// replica's field would not change its parameter. The field is found in
// the smallest block of copied memory that holds the module's.
func (r *replicator) rebindFields() {
	for _, pair := range r.slots {
		orig, cp := pair[0], pair[1]
		for i := range orig {
			p := uintptr(unsafe.Pointer(orig[i].ref))
			var best *block
			for j := range r.blocks {
				b := &r.blocks[j]
				start := uintptr(b.orig)
				if p >= start && p-start+unsafe.Sizeof(orig[i].ref) <= b.size && (best == nil || b.size < best.size) {
					best = b
				}
			}
			if best != nil {
				cp[i].ref = (**vram.Tensor)(unsafe.Add(best.cp, p-uintptr(best.orig)))
			}
		}
	}
}

type ptrKey struct {
	p unsafe.Pointer
	t reflect.Type
}

var (
	tensorPtrType  = reflect.TypeFor[*vram.Tensor]()
	deviceType     = reflect.TypeFor[vram.Device]()
	replicatorTyp  = reflect.TypeFor[Replicator]()
	paramSlotsType = reflect.TypeFor[[]paramSlot]()
)

// fail records the first error of the walk.
func (r *replicator) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

// copy returns a copy of v (of any type) with every tensor and module in
// it replicated. path names v for errors ("sub1.0.Weight"). The result has
// v's type and is addressable-independent: it never aliases v's memory,
// except for values copied as they are.
func (r *replicator) copy(v reflect.Value, path string) reflect.Value {
	t := v.Type()
	if r.err != nil || !mayHold(t) {
		return v
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		if t == tensorPtrType {
			return reflect.ValueOf(r.tensor(open(v).Interface().(*vram.Tensor), path))
		}
		key := ptrKey{v.UnsafePointer(), t}
		if done, ok := r.ptrs[key]; ok {
			return done
		}
		if t.Implements(replicatorTyp) && t.Implements(moduleType) {
			rep, err := open(v).Interface().(Replicator).Replicate(r.dev)
			if err != nil {
				r.fail("%v at %s: %w", t, where(path, t), err)
				return v
			}
			out := reflect.ValueOf(rep)
			if !out.IsValid() || out.Type() != t || isNilModule(rep) {
				r.fail("%s: Replicate returned %T, want a non-nil %v", where(path, t), rep, t)
				return v
			}
			r.ptrs[key] = out
			return out
		}
		out := reflect.New(t.Elem())
		r.ptrs[key] = out // before the fields, for cycles
		if k := t.Elem().Kind(); (k == reflect.Struct || k == reflect.Array) && t.Elem().Size() > 0 {
			// A struct that may hold fields registered as parameters;
			// a pointer to a field itself is not one.
			r.blocks = append(r.blocks, block{orig: v.UnsafePointer(), cp: out.UnsafePointer(), size: t.Elem().Size()})
		}
		out.Elem().Set(r.copy(open(v.Elem()), path))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		inner := r.copy(open(v.Elem()), path)
		out := reflect.New(t).Elem()
		out.Set(inner)
		return out
	case reflect.Struct:
		if t == deviceType {
			if r.srcOK && v.Interface().(vram.Device) == r.src {
				return reflect.ValueOf(r.dev)
			}
			return v
		}
		out := reflect.New(t).Elem()
		src := addressable(v)
		out.Set(src)
		for i := range t.NumField() {
			f := t.Field(i)
			if !mayHold(f.Type) {
				continue
			}
			name := f.Name
			if f.Anonymous {
				name = ""
			}
			fv := r.copy(open(src.Field(i)), join(path, name))
			open(out.Field(i)).Set(fv)
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(t, v.Len(), v.Len())
		if size := uintptr(v.Len()) * t.Elem().Size(); size > 0 {
			r.blocks = append(r.blocks, block{orig: v.UnsafePointer(), cp: out.UnsafePointer(), size: size})
		}
		for i := range v.Len() {
			out.Index(i).Set(r.copy(open(v.Index(i)), join(path, fmt.Sprint(i))))
		}
		if t == paramSlotsType {
			r.slots = append(r.slots, [2][]paramSlot{v.Interface().([]paramSlot), out.Interface().([]paramSlot)})
		}
		return out
	case reflect.Array:
		out := reflect.New(t).Elem()
		for i := range v.Len() {
			out.Index(i).Set(r.copy(open(v.Index(i)), join(path, fmt.Sprint(i))))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(t, v.Len())
		it := v.MapRange()
		for it.Next() {
			k := open(it.Key())
			out.SetMapIndex(r.copy(k, join(path, fmt.Sprint(k))), r.copy(open(it.Value()), join(path, fmt.Sprint(k))))
		}
		return out
	}
	return v
}

// tensor returns t's replica on r.dev, copying it the first time.
func (r *replicator) tensor(t *vram.Tensor, path string) *vram.Tensor {
	if done, ok := r.tensors[t]; ok {
		return done
	}
	if t.Released() {
		if name, ok := r.names[t]; ok {
			path = "parameter " + name
		}
		r.fail("%s: the tensor was released", where(path, tensorPtrType))
		return t
	}
	var c *vram.Tensor
	vram.NoGrad(func() {
		if t.Device() == r.dev {
			c = t.Clone()
		} else {
			c = t.To(r.dev)
		}
	})
	vram.Keep(c)
	r.made = append(r.made, c)
	if t.IsLeaf() && t.RequiresGrad() {
		c.SetRequiresGrad(true)
	}
	r.tensors[t] = c
	return c
}

func where(path string, t reflect.Type) string {
	if path == "" {
		return t.String()
	}
	return path
}

func join(path, name string) string {
	switch {
	case name == "":
		return path
	case path == "":
		return name
	}
	return path + "." + name
}

// addressable returns v itself when it is addressable, else an
// addressable copy, so that its unexported fields can be opened.
func addressable(v reflect.Value) reflect.Value {
	if v.CanAddr() {
		return v
	}
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	return c
}

// open returns v without the read-only mark that reflection gives values
// reached through unexported fields, so that they can be read as
// interfaces and written. Struct fields are the only place the mark comes
// from, and the walk reaches them in addressable structs (copy makes each
// struct addressable first); everything reached from an opened value is
// unmarked. The walk only writes into values it made.
func open(v reflect.Value) reflect.Value {
	if v.CanInterface() {
		return v
	}
	if !v.CanAddr() {
		panic("nn: internal: replicate reached a read-only value that is not addressable")
	}
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

var moduleType = reflect.TypeFor[Module]()

// holds caches mayHold per type.
var holds sync.Map // reflect.Type -> bool

// mayHold reports whether a value of type t can hold a tensor, a module or
// a device, so that Replicate must look inside it: through struct fields,
// elements, map keys and values, pointers, and interfaces that a module or
// a tensor can be stored in (such as Module or any; not io.Writer).
func mayHold(t reflect.Type) bool {
	if b, ok := holds.Load(t); ok {
		return b.(bool)
	}
	b := computeHold(t, map[reflect.Type]bool{})
	holds.Store(t, b)
	return b
}

func computeHold(t reflect.Type, visiting map[reflect.Type]bool) bool {
	if b, ok := holds.Load(t); ok {
		return b.(bool)
	}
	if visiting[t] {
		// A recursive type: assume it may, which only costs a copy.
		return true
	}
	visiting[t] = true
	defer delete(visiting, t)
	switch t.Kind() {
	case reflect.Interface:
		return moduleType.Implements(t) || tensorPtrType.Implements(t)
	case reflect.Pointer:
		return t == tensorPtrType || t.Implements(moduleType) || computeHold(t.Elem(), visiting)
	case reflect.Slice, reflect.Array:
		return computeHold(t.Elem(), visiting)
	case reflect.Map:
		return computeHold(t.Key(), visiting) || computeHold(t.Elem(), visiting)
	case reflect.Struct:
		if t == deviceType {
			return true
		}
		for i := range t.NumField() {
			if computeHold(t.Field(i).Type, visiting) {
				return true
			}
		}
	}
	return false
}
