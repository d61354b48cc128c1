package nn

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/vramgo/vram"
)

// Module is a neural-network layer or a model made of layers
// (torch.nn.Module). Layers embed [Base], which implements every method but
// Forward.
type Module interface {
	// Forward computes the module's output for input x. The result is a new
	// tensor that the caller owns.
	Forward(x *vram.Tensor) *vram.Tensor
	// NamedParameters returns the parameters of the module and of its
	// sub-modules, recursively, in registration order, named like the keys
	// of PyTorch's state_dict ("0.weight", "encoder.bias"). A tensor
	// registered more than once is listed once, under its first name.
	NamedParameters() []NamedParameter
	// Parameters returns the tensors of NamedParameters, in the same order.
	Parameters() []*vram.Tensor
	// NamedChildren returns the module's direct sub-modules with their
	// names, in registration order (named_children). [Modules] and
	// [NamedModules] walk them recursively.
	NamedChildren() []NamedModule
	// To moves every parameter to device d in place, keeping the tensors'
	// identity, so that optimizers holding them see the move.
	To(d vram.Device)
	// CUDA moves every parameter to CUDA device index, or to the current
	// CUDA device when no index is given.
	CUDA(index ...int)
	// CPU moves every parameter to the CPU.
	CPU()
	// Train puts the module and its sub-modules in training mode (the
	// default), which matters for layers such as [Dropout].
	Train()
	// Eval puts the module and its sub-modules in evaluation mode.
	Eval()
	// Training reports whether the module is in training mode.
	Training() bool
}

// NamedParameter is a parameter with its dotted name.
type NamedParameter struct {
	Name   string
	Tensor *vram.Tensor
}

// NamedModule is a module with its dotted name: "" for the module walked
// from, "0" for its first sub-module, "encoder.fc1" deeper down.
type NamedModule struct {
	Name   string
	Module Module
}

// Base implements every method of [Module] except Forward. Layers embed it,
// register their parameters and sub-modules in their constructor with
// [Base.RegisterParameter] and [Base.RegisterModule], and implement Forward
// themselves. The zero value is an empty module in training mode.
//
// Registration, To, CUDA, CPU, Train and Eval change the module and must
// not run concurrently with any other use of it; NamedParameters,
// Parameters, Training and Forward may run concurrently with each other.
type Base struct {
	params   []paramSlot
	buffers  []paramSlot
	masked   []string // the parameters whose pruning masks are buffers
	children []namedModule
	eval     bool // the zero value is training mode, like PyTorch
	// fixedBuffers keeps the buffers' dtypes through [ConvertDType]: those
	// of a quantized [Linear], whose scale and bias Forward casts itself.
	fixedBuffers bool
}

type namedModule struct {
	name string
	mod  Module
}

// paramSlot is a registered parameter: its name and where its tensor is
// read from, each time it is needed: the module's field for a parameter
// registered with [Base.RegisterParameterField], a cell of its own for one
// registered with [Base.RegisterParameter].
type paramSlot struct {
	name string
	ref  **vram.Tensor
}

// ownParams returns b's own parameters, in registration order, leaving
// out those whose field holds nil.
func (b *Base) ownParams() []NamedParameter { return slotTensors(b.params) }

// ownBuffers returns b's own buffers, in registration order, leaving out
// those whose field holds nil.
func (b *Base) ownBuffers() []NamedParameter { return slotTensors(b.buffers) }

// slotTensors returns the tensors that slots hold now, by their names,
// leaving out the slots that hold nil.
func slotTensors(slots []paramSlot) []NamedParameter {
	out := make([]NamedParameter, 0, len(slots))
	for _, p := range slots {
		if t := *p.ref; t != nil {
			out = append(out, NamedParameter{Name: p.name, Tensor: t})
		}
	}
	return out
}

// checkName panics with an *vram.Error of kind vram.ErrArgument unless name
// can be a parameter or module name.
func (b *Base) checkName(op, name string) {
	switch {
	case name == "":
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "empty name"})
	case strings.Contains(name, "."):
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("name %q must not contain a dot", name)})
	}
	for _, p := range b.params {
		if p.name == name {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("a parameter named %q is already registered", name)})
		}
	}
	for _, p := range b.buffers {
		if p.name == name {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("a buffer named %q is already registered", name)})
		}
	}
	for _, c := range b.children {
		if c.name == name {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("a module named %q is already registered", name)})
		}
	}
}

// RegisterParameter adds t to the module's parameters under name, and
// exempts it from enclosing [vram.Tidy] calls with [vram.Keep] (call it on
// the goroutine that created t). The parameter stays t: assigning another
// tensor to a field that held t changes nothing, which
// [Base.RegisterParameterField] changes. It panics with an *vram.Error of
// kind vram.ErrArgument for a nil tensor, an empty name, a name containing
// a dot or a name already registered.
func (b *Base) RegisterParameter(name string, t *vram.Tensor) {
	if t == nil {
		panic(&vram.Error{Op: "register parameter", Kind: vram.ErrArgument, Detail: fmt.Sprintf("nil tensor for parameter %q", name)})
	}
	b.checkName("register parameter", name)
	vram.Keep(t)
	b.params = append(b.params, paramSlot{name: name, ref: &t})
}

// RegisterParameterField adds the tensor that *field holds to the
// module's parameters under name, as RegisterParameter does, and makes the
// field the parameter: every listing ([Base.NamedParameters], [StateDict],
// optimizers made afterwards) reads the tensor from the field, so that
// assigning another tensor to it replaces the parameter, as assigning a
// module attribute does in PyTorch. This is how weights are tied:
//
//	head.Weight = embed.Weight // GPT-2's output projection is its embedding
//
// after which the model lists the shared tensor once among its parameters,
// [StateDict] keys it under both names, [Load] loads it once, and the
// gradients of both uses add up in it. A field holding nil is left out of
// the listings until a tensor is assigned to it (a parameter set to None).
// The layers of this package register their exported tensor fields this
// way (Weight, Bias, ...). A tensor assigned later is not exempted from
// enclosing [vram.Tidy] calls: make it outside them or [vram.Keep] it. The
// tensor the field held before is no longer the module's: release it when
// nothing else uses it, or leave it to the garbage collector.
//
// field must point into the module's own struct (field = &l.Weight, with l
// the module), so that [Replicate] finds it in the replica's struct; a
// copy of the struct made otherwise (m2 := *m) reads its parameters from
// m's fields, so copy modules with Replicate. It
// panics with an *vram.Error of kind vram.ErrArgument for a nil field, a
// field that holds nil and the name errors of RegisterParameter.
func (b *Base) RegisterParameterField(name string, field **vram.Tensor) {
	if field == nil || *field == nil {
		panic(&vram.Error{Op: "register parameter", Kind: vram.ErrArgument, Detail: fmt.Sprintf("nil tensor for parameter %q", name)})
	}
	b.checkName("register parameter", name)
	vram.Keep(*field)
	b.params = append(b.params, paramSlot{name: name, ref: field})
}

// RegisterBuffer adds t to the module's buffers under name
// (register_buffer): state that is not trained but belongs to the model,
// such as [BatchNorm2d]'s running statistics. Buffers are saved and loaded
// with the parameters ([StateDict], [Save], [Load]) and moved by To, and
// [NamedBuffers] lists them; optimizers never see them. t is exempted from
// enclosing [vram.Tidy] calls. The name rules are RegisterParameter's.
// The buffer stays t whatever the module's fields are assigned afterwards;
// [Base.RegisterBufferField] registers a field.
func (b *Base) RegisterBuffer(name string, t *vram.Tensor) {
	if t == nil {
		panic(&vram.Error{Op: "register buffer", Kind: vram.ErrArgument, Detail: fmt.Sprintf("nil tensor for buffer %q", name)})
	}
	b.checkName("register buffer", name)
	vram.Keep(t)
	b.buffers = append(b.buffers, paramSlot{name: name, ref: &t})
}

// RegisterBufferField adds the tensor that *field holds to the module's
// buffers under name, as RegisterBuffer does, and makes the field the
// buffer, as [Base.RegisterParameterField] does for parameters: assigning
// another tensor to the field replaces the buffer in [NamedBuffers],
// [StateDict], [Save], [Load] and To, as assigning a registered buffer's
// attribute does in PyTorch (bn.running_mean = t), and a field holding
// nil leaves the buffer out of them (a buffer set to None). The layers of
// this package register their exported buffer fields this way
// ([BatchNorm2d.RunningMean], ...). A tensor assigned later is not
// exempted from enclosing [vram.Tidy] calls, and the one the field held
// before is no longer the module's: release it when nothing else uses it.
// field must point into the module's own struct, as for
// RegisterParameterField. It panics with an *vram.Error of kind
// vram.ErrArgument for a nil field, a field that holds nil and the name
// errors of RegisterParameter.
func (b *Base) RegisterBufferField(name string, field **vram.Tensor) {
	if field == nil || *field == nil {
		panic(&vram.Error{Op: "register buffer", Kind: vram.ErrArgument, Detail: fmt.Sprintf("nil tensor for buffer %q", name)})
	}
	b.checkName("register buffer", name)
	vram.Keep(*field)
	b.buffers = append(b.buffers, paramSlot{name: name, ref: field})
}

// NamedBuffers returns the module's own buffers, then those of each
// sub-module in registration order, with dotted names ("1.running_mean"),
// as PyTorch's named_buffers(). A tensor registered more than once is
// listed once.
func (b *Base) NamedBuffers() []NamedParameter {
	var out []NamedParameter
	seen := map[*vram.Tensor]bool{}
	add := func(name string, t *vram.Tensor) {
		if !seen[t] {
			seen[t] = true
			out = append(out, NamedParameter{Name: name, Tensor: t})
		}
	}
	for _, p := range b.ownBuffers() {
		add(p.Name, p.Tensor)
	}
	for _, c := range b.children {
		for _, p := range NamedBuffers(c.mod) {
			add(c.name+"."+p.Name, p.Tensor)
		}
	}
	return out
}

// bufferer is implemented by modules with buffers (every module that
// embeds [Base]).
type bufferer interface {
	NamedBuffers() []NamedParameter
}

// NamedBuffers returns the buffers of m and of its sub-modules with dotted
// names ([Base.NamedBuffers]): of a [Wrapper] without a NamedBuffers
// method of its own (a [Checkpointed] module), those of the module it
// wraps, under the same names, as its parameters are. It returns nil for
// a module that has none or does not embed Base.
func NamedBuffers(m Module) []NamedParameter {
	if isNil(m) {
		return nil
	}
	if bm, ok := m.(bufferer); ok {
		return bm.NamedBuffers()
	}
	if w, ok := m.(Wrapper); ok {
		if inner := w.Unwrap(); !isNil(inner) {
			return NamedBuffers(inner)
		}
	}
	return nil
}

// RegisterModule adds m as a sub-module under name: its parameters appear
// in NamedParameters as name + "." + their own names, and To, Train and Eval
// reach it. A module may be registered in several places (shared
// layers), but not inside itself. It panics with an *vram.Error of kind
// vram.ErrArgument for a nil module (a nil pointer too), a bad or duplicate
// name (see [Base.RegisterParameter]), and a module that is b's own or
// holds it among its sub-modules, which would make the module a cycle
// that NamedParameters and the state dicts could never finish walking.
func (b *Base) RegisterModule(name string, m Module) {
	if isNil(m) {
		panic(&vram.Error{Op: "register module", Kind: vram.ErrArgument, Detail: fmt.Sprintf("nil module %q", name)})
	}
	b.checkName("register module", name)
	for _, nm := range NamedModules(m) {
		if o, ok := nm.Module.(baser); ok && o.base() == b {
			where := "is the module itself"
			if nm.Name != "" {
				where = fmt.Sprintf("holds the module itself as %q", nm.Name)
			}
			panic(&vram.Error{Op: "register module", Kind: vram.ErrArgument,
				Detail: fmt.Sprintf("module %q (%T) %s: a module cannot contain itself", name, m, where)})
		}
	}
	b.children = append(b.children, namedModule{name: name, mod: m})
}

// baser is implemented by every module that embeds [Base], through the
// pointer to its Base.
type baser interface {
	base() *Base
}

// base returns b, so that RegisterModule can tell a module by its Base.
func (b *Base) base() *Base { return b }

// NamedParameters returns the module's own parameters, then those of each
// sub-module in registration order, with dotted names. A tensor registered
// more than once (shared weights) is listed once, under its first name.
func (b *Base) NamedParameters() []NamedParameter {
	var out []NamedParameter
	seen := map[*vram.Tensor]bool{}
	add := func(name string, t *vram.Tensor) {
		if !seen[t] {
			seen[t] = true
			out = append(out, NamedParameter{Name: name, Tensor: t})
		}
	}
	for _, p := range b.ownParams() {
		add(p.Name, p.Tensor)
	}
	for _, c := range b.children {
		for _, p := range c.mod.NamedParameters() {
			add(c.name+"."+p.Name, p.Tensor)
		}
	}
	return out
}

// NamedChildren returns the sub-modules registered with
// [Base.RegisterModule], in registration order, under their names.
func (b *Base) NamedChildren() []NamedModule {
	out := make([]NamedModule, len(b.children))
	for i, c := range b.children {
		out[i] = NamedModule{Name: c.name, Module: c.mod}
	}
	return out
}

// Wrapper is implemented by a module that wraps another and changes only
// how its Forward runs, such as [Checkpointed]: its parameters, children
// and state-dict names are the wrapped module's.
type Wrapper interface {
	Module
	// Unwrap returns the wrapped module.
	Unwrap() Module
}

// NamedModules returns m and all its sub-modules, recursively, m first with
// the name "" and then each sub-module in registration order before its own
// sub-modules, under dotted names ("0", "0.fc", "1"), as PyTorch's
// named_modules() does. A [Wrapper] is followed by the module it wraps,
// under the same name (the wrapping changes no parameter name), so that
// type assertions reach a wrapped layer: a checkpointed [Linear] is still
// found, pruned and quantized. A module registered more than once (shared)
// is listed once, under its first name. A nil m gives nil.
func NamedModules(m Module) []NamedModule {
	if isNil(m) {
		return nil
	}
	var out []NamedModule
	seen := map[Module]bool{}
	var walk func(prefix string, m Module)
	walk = func(prefix string, m Module) {
		if reflect.TypeOf(m).Comparable() {
			// Func values and other modules that are not comparable
			// cannot be shared by identity; only the others are checked.
			if seen[m] {
				return
			}
			seen[m] = true
		}
		out = append(out, NamedModule{Name: prefix, Module: m})
		if w, ok := m.(Wrapper); ok {
			if inner := w.Unwrap(); !isNil(inner) {
				// The wrapper's children are the wrapped module's.
				walk(prefix, inner)
				return
			}
		}
		for _, c := range m.NamedChildren() {
			name := c.Name
			if prefix != "" {
				name = prefix + "." + c.Name
			}
			walk(name, c.Module)
		}
	}
	walk("", m)
	return out
}

// Modules returns the modules of [NamedModules]: m first, then every
// sub-module, recursively (PyTorch's model.modules()). Type assertions pick
// layers out of it:
//
//	for _, l := range nn.Modules(model) {
//		if lin, ok := l.(*nn.Linear); ok {
//			nn.XavierUniform(lin.Weight, 1, nil)
//		}
//	}
func Modules(m Module) []Module {
	named := NamedModules(m)
	out := make([]Module, len(named))
	for i, n := range named {
		out[i] = n.Module
	}
	return out
}

// Parameters returns the tensors of [Base.NamedParameters].
func (b *Base) Parameters() []*vram.Tensor {
	named := b.NamedParameters()
	out := make([]*vram.Tensor, len(named))
	for i, p := range named {
		out[i] = p.Tensor
	}
	return out
}

// To moves every parameter (and its gradient) and every buffer to device d
// in place with [vram.Tensor.MoveTo], so that the tensors keep their
// identity. The memory they take on d is labelled "parameters"
// ([vram.Region]) in snapshots and out-of-memory reports. It panics with
// an *vram.Error of kind vram.ErrReleased, before moving anything, when a
// parameter or buffer was released.
func (b *Base) To(d vram.Device) {
	checkLive("to", "parameter", b.NamedParameters())
	checkLive("to", "buffer", b.NamedBuffers())
	vram.Region(ParametersRegion, func() {
		for _, p := range b.Parameters() {
			p.MoveTo(d)
		}
		for _, p := range b.NamedBuffers() {
			p.Tensor.MoveTo(d)
		}
	})
}

// ToDType converts the module's floating-point parameters (and their
// gradients) and buffers to dtype dt in place with
// [vram.Tensor.CastInPlace], so that optimizers holding them see the
// change, as [ConvertDType] does: the parameters and buffers of
// sub-modules that are [Float32Layer]s (normalization layers) stay
// float32. It panics with an *vram.Error, before converting anything, of
// kind vram.ErrDType when dt is not a floating-point type and of kind
// vram.ErrReleased when a parameter was released.
func (b *Base) ToDType(dt vram.DType) {
	checkFloatDType(dt)
	checkLive("to_dtype", "parameter", b.NamedParameters())
	vram.Region(ParametersRegion, func() {
		for _, p := range b.ownParams() {
			if p.Tensor.DType().IsFloat() {
				p.Tensor.CastInPlace(dt)
			}
		}
		if !b.fixedBuffers {
			for _, p := range b.ownBuffers() {
				castBuffer(p.Tensor, dt)
			}
		}
		b.castOwnMasks()
	})
	for _, c := range b.children {
		ConvertDType(c.mod, dt)
	}
}

// Half converts the module to float16 with [Base.ToDType] (PyTorch's
// model.half()); normalization layers stay float32.
func (b *Base) Half() { b.ToDType(vram.Float16) }

// BFloat16 converts the module to bfloat16 with [Base.ToDType];
// normalization layers stay float32.
func (b *Base) BFloat16() { b.ToDType(vram.BFloat16) }

// Float converts the module back to float32 with [Base.ToDType].
func (b *Base) Float() { b.ToDType(vram.Float32) }

// Float32Layer is implemented by layers whose parameters, and whose
// arithmetic, stay float32 when a model is converted to 16 bits (converted
// to float64, they follow the model)
// ([ConvertDType], Half, BFloat16): normalization layers such as
// [LayerNorm], whose statistics lose too much in 16 bits. Such a layer casts
// its input up to float32 and its output back to the input's dtype. A custom
// normalization layer implements it to get the same treatment.
type Float32Layer interface {
	Module
	// KeepsFloat32 marks the layer; it does nothing.
	KeepsFloat32()
}

// ConvertDType converts every floating-point parameter of m and of its
// sub-modules (and their gradients) and every floating-point buffer to dt
// in place, keeping the tensors' identity so that optimizers holding them
// see the change, as PyTorch's model.to(dtype) casts parameters and
// buffers; the parameters and buffers of [Float32Layer]s found by
// [Modules] are converted to float32 instead when dt is a 16-bit type (to
// float64 they convert like the rest, as PyTorch's model.double() converts
// its normalization layers and their running statistics). Integer
// parameters and buffers (a batch norm's num_batches_tracked) are left
// alone, and so are the buffers of a quantized [Linear]. It works on any [Module], including
// those that do not embed [Base]. It panics with an *vram.Error, before
// converting anything, of kind vram.ErrDType when dt is not a
// floating-point type and of kind vram.ErrReleased when a parameter was
// released.
//
// Optimizer state (Adam's moments, momentum buffers) is not converted: make
// the optimizer after converting the model, or keep its state as it is.
func ConvertDType(m Module, dt vram.DType) {
	checkFloatDType(dt)
	if isNil(m) {
		return
	}
	checkLive("to_dtype", "parameter", m.NamedParameters())
	keep := map[*vram.Tensor]bool{}
	fixed := map[*vram.Tensor]bool{}
	for _, sub := range Modules(m) {
		if _, ok := sub.(Float32Layer); ok {
			for _, p := range sub.Parameters() {
				keep[p] = true
			}
			for _, p := range NamedBuffers(sub) {
				keep[p.Tensor] = true
			}
		}
		if o, ok := sub.(baser); ok && o.base().fixedBuffers {
			for _, p := range o.base().ownBuffers() {
				fixed[p.Tensor] = true
			}
		}
	}
	to := func(t *vram.Tensor) vram.DType {
		if keep[t] && dt.Size() < 4 {
			return vram.Float32
		}
		return dt
	}
	vram.Region(ParametersRegion, func() {
		for _, p := range m.Parameters() {
			if p.DType().IsFloat() {
				p.CastInPlace(to(p))
			}
		}
		for _, p := range NamedBuffers(m) {
			if !fixed[p.Tensor] {
				castBuffer(p.Tensor, to(p.Tensor))
			}
		}
		castMasks(m)
	})
}

// castBuffer casts buffer t to dt in place when it holds floating-point
// values and is not released; integer and boolean buffers keep their
// dtype.
func castBuffer(t *vram.Tensor, dt vram.DType) {
	if !t.Released() && t.DType().IsFloat() && t.DType() != dt {
		t.CastInPlace(dt)
	}
}

// checkLive panics, naming op, with an *vram.Error of kind
// vram.ErrReleased when one of ts (parameters or buffers, as what says)
// was released: the functions that change every tensor of a module in
// place call it first, so that they refuse a module they could change
// only in part.
func checkLive(op, what string, ts []NamedParameter) {
	for _, p := range ts {
		if p.Tensor.Released() {
			panic(&vram.Error{Op: op, Kind: vram.ErrReleased, Detail: fmt.Sprintf("%s %q was released", what, p.Name)})
		}
	}
}

// checkFloatDType panics with an *vram.Error of kind vram.ErrDType unless
// dt is a floating-point dtype.
func checkFloatDType(dt vram.DType) {
	if !dt.IsFloat() {
		panic(&vram.Error{Op: "to_dtype", Kind: vram.ErrDType,
			Detail: fmt.Sprintf("dtype %v is not a floating-point type; convert modules to float16, bfloat16, float32 or float64", dt)})
	}
}

// ParametersRegion is the [vram.Region] label of the memory of parameters
// that layers create or that [Base.To] moves.
const ParametersRegion = "parameters"

// CUDA moves every parameter to CUDA device index, or to the current CUDA
// device when no index is given.
func (b *Base) CUDA(index ...int) { b.To(vram.CUDA(index...)) }

// CPU moves every parameter to the CPU.
func (b *Base) CPU() { b.To(vram.CPU) }

// Train puts the module and its sub-modules in training mode.
func (b *Base) Train() {
	b.eval = false
	for _, c := range b.children {
		c.mod.Train()
	}
}

// Eval puts the module and its sub-modules in evaluation mode.
func (b *Base) Eval() {
	b.eval = true
	for _, c := range b.children {
		c.mod.Eval()
	}
}

// Training reports whether the module is in training mode.
func (b *Base) Training() bool { return !b.eval }

// ZeroGrad releases the gradients of the module's parameters and of its
// sub-modules' (PyTorch's model.zero_grad(), set_to_none=True): the method
// form of [ZeroGrad].
func (b *Base) ZeroGrad() {
	for _, p := range b.Parameters() {
		p.ZeroGrad()
	}
}

// Func adapts an ordinary function to a [Module] without parameters, like
// http.HandlerFunc: nn.Func(func(x *vram.Tensor) *vram.Tensor { return
// x.Flatten(1, -1) }). Its mode and device methods do nothing, and Training
// always reports true.
type Func func(x *vram.Tensor) *vram.Tensor

// Forward returns f(x).
func (f Func) Forward(x *vram.Tensor) *vram.Tensor { return f(x) }

// NamedParameters returns nil.
func (f Func) NamedParameters() []NamedParameter { return nil }

// Parameters returns nil.
func (f Func) Parameters() []*vram.Tensor { return nil }

// NamedChildren returns nil.
func (f Func) NamedChildren() []NamedModule { return nil }

// To does nothing.
func (f Func) To(vram.Device) {}

// CUDA does nothing.
func (f Func) CUDA(...int) {}

// CPU does nothing.
func (f Func) CPU() {}

// ToDType does nothing.
func (f Func) ToDType(vram.DType) {}

// Half does nothing.
func (f Func) Half() {}

// BFloat16 does nothing.
func (f Func) BFloat16() {}

// Float does nothing.
func (f Func) Float() {}

// Train does nothing.
func (f Func) Train() {}

// Eval does nothing.
func (f Func) Eval() {}

// Training reports true.
func (f Func) Training() bool { return true }

// Release releases every parameter of m (and their gradients) and every
// buffer. The module must not be used afterwards. A nil m does nothing.
func Release(m Module) {
	if isNil(m) {
		return
	}
	for _, p := range m.Parameters() {
		p.Release()
	}
	for _, b := range NamedBuffers(m) {
		b.Tensor.Release()
	}
}
