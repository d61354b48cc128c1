package nn

import (
	"reflect"
	"strings"

	"github.com/vramgo/vram"
)

// Format returns a description of m and its sub-modules, one per line and
// indented by depth, in the layout of PyTorch's print(model):
//
//	Sequential(
//	  (0): Linear(weight [16, 4], bias [16])
//	  (1): ReLU()
//	  (2): Linear(weight [2, 16], bias [2])
//	)
//
// Each module is named by its Go type and lists its own parameters and
// buffers (those of its sub-modules appear under them) with their shapes,
// and their dtype and device where these are not float32 and the CPU. A
// [Wrapper] shows the module it wraps inside its own name, as in
// Checkpointed(Linear(...)). A released tensor is marked as such. A nil m
// gives "<nil>". Format reads no tensor data, so it never waits for a
// device.
func Format(m Module) string {
	var b strings.Builder
	formatModule(&b, m, 0)
	return b.String()
}

func formatModule(b *strings.Builder, m Module, depth int) {
	if isNil(m) {
		b.WriteString("<nil>")
		return
	}
	b.WriteString(moduleTypeName(m))
	b.WriteString("(")
	if w, ok := m.(Wrapper); ok {
		formatModule(b, w.Unwrap(), depth)
		b.WriteString(")")
		return
	}
	var own []string
	for _, p := range m.NamedParameters() {
		if !strings.Contains(p.Name, ".") {
			own = append(own, formatTensor(p))
		}
	}
	for _, p := range NamedBuffers(m) {
		if !strings.Contains(p.Name, ".") {
			own = append(own, formatTensor(p))
		}
	}
	b.WriteString(strings.Join(own, ", "))
	children := m.NamedChildren()
	if len(children) == 0 {
		b.WriteString(")")
		return
	}
	indent := strings.Repeat("  ", depth+1)
	if len(own) > 0 {
		b.WriteString(",")
	}
	b.WriteString("\n")
	for _, c := range children {
		b.WriteString(indent)
		b.WriteString("(")
		b.WriteString(c.Name)
		b.WriteString("): ")
		formatModule(b, c.Module, depth+1)
		b.WriteString("\n")
	}
	b.WriteString(strings.Repeat("  ", depth))
	b.WriteString(")")
}

// isNil reports whether m is nil or holds a nil pointer or function (a
// "var l *Linear" passed as a Module), which the functions that take a
// module treat alike.
func isNil(m Module) bool { return m == nil || isNilModule(m) }

// isNilModule reports whether m is a typed nil pointer or function.
func isNilModule(m Module) bool {
	v := reflect.ValueOf(m)
	switch v.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// moduleTypeName is the name of m's type without its package and pointer:
// "Linear" for a *nn.Linear, "MLP" for a caller's *main.MLP.
func moduleTypeName(m Module) string {
	t := reflect.TypeOf(m)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if name := t.Name(); name != "" {
		return name
	}
	return t.String()
}

// formatTensor is "name [shape]", followed by the dtype and the device when
// they are not float32 and the CPU.
func formatTensor(p NamedParameter) string {
	if p.Tensor == nil {
		return p.Name + " <nil>"
	}
	if zeroTensor(p.Tensor) {
		return p.Name + " <zero Tensor>"
	}
	var b strings.Builder
	b.WriteString(p.Name)
	b.WriteString(" ")
	b.WriteString(p.Tensor.Shape().String())
	if dt := p.Tensor.DType(); dt != vram.Float32 {
		b.WriteString(" ")
		b.WriteString(dt.String())
	}
	if d := p.Tensor.Device(); d != vram.CPU {
		b.WriteString(" ")
		b.WriteString(d.String())
	}
	if p.Tensor.Released() {
		b.WriteString(" (released)")
	}
	return b.String()
}
