package nn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestNilSequentialMethods calls every method of a nil *Sequential (a
// model declared and never made): the methods that only read answer as an
// empty Sequential does, and those that would run, index or change the
// model panic with an *vram.Error of kind ErrArgument that names the nil
// Sequential, never with a nil-pointer dereference.
func TestNilSequentialMethods(t *testing.T) {
	x := vram.Ones(vram.Shape{2, 3})
	defer x.Release()
	p := vram.Zeros(vram.Shape{1})
	defer p.Release()
	lin := nn.NewLinear(3, 3)
	defer nn.Release(lin)
	var s *nn.Sequential
	tests := []struct {
		name string
		call func(t *testing.T) // checks what it must return, for the methods that read
		fail bool               // whether it must panic with ErrArgument
	}{
		{"Len", func(t *testing.T) {
			if n := s.Len(); n != 0 {
				t.Errorf("Len() = %d, want 0", n)
			}
		}, false},
		{"Modules", func(t *testing.T) {
			if m := s.Modules(); len(m) != 0 {
				t.Errorf("Modules() = %v, want none", m)
			}
		}, false},
		{"NamedModules", func(t *testing.T) {
			if m := s.NamedModules(); len(m) != 0 {
				t.Errorf("NamedModules() = %v, want none", m)
			}
		}, false},
		{"NamedChildren", func(t *testing.T) {
			if m := s.NamedChildren(); len(m) != 0 {
				t.Errorf("NamedChildren() = %v, want none", m)
			}
		}, false},
		{"NamedParameters", func(t *testing.T) {
			if ps := s.NamedParameters(); len(ps) != 0 {
				t.Errorf("NamedParameters() = %v, want none", ps)
			}
		}, false},
		{"Parameters", func(t *testing.T) {
			if ps := s.Parameters(); len(ps) != 0 {
				t.Errorf("Parameters() = %v, want none", ps)
			}
		}, false},
		{"NamedBuffers", func(t *testing.T) {
			if bs := s.NamedBuffers(); len(bs) != 0 {
				t.Errorf("NamedBuffers() = %v, want none", bs)
			}
		}, false},
		{"Training", func(t *testing.T) {
			if !s.Training() {
				t.Error("Training() = false, want true, as for a new Sequential")
			}
		}, false},
		{"StateDict", func(t *testing.T) {
			if sd := nn.StateDict(s); len(sd) != 0 {
				t.Errorf("StateDict = %v, want none", sd)
			}
		}, false},
		{"Forward", func(t *testing.T) { s.Forward(x) }, true},
		{"At", func(t *testing.T) { s.At(0) }, true},
		{"Append", func(t *testing.T) { s.Append(lin) }, true},
		{"To", func(t *testing.T) { s.To(vram.CPU) }, true},
		{"CPU", func(t *testing.T) { s.CPU() }, true},
		{"CUDA", func(t *testing.T) { s.CUDA() }, true},
		{"ToDType", func(t *testing.T) { s.ToDType(vram.Float64) }, true},
		{"Half", func(t *testing.T) { s.Half() }, true},
		{"BFloat16", func(t *testing.T) { s.BFloat16() }, true},
		{"Float", func(t *testing.T) { s.Float() }, true},
		{"Train", func(t *testing.T) { s.Train() }, true},
		{"Eval", func(t *testing.T) { s.Eval() }, true},
		{"ZeroGrad", func(t *testing.T) { s.ZeroGrad() }, true},
		{"RegisterModule", func(t *testing.T) { s.RegisterModule("head", lin) }, true},
		{"RegisterParameter", func(t *testing.T) { s.RegisterParameter("scale", p) }, true},
		{"RegisterParameterField", func(t *testing.T) { s.RegisterParameterField("scale", &p) }, true},
		{"RegisterBuffer", func(t *testing.T) { s.RegisterBuffer("count", p) }, true},
		{"RegisterBufferField", func(t *testing.T) { s.RegisterBufferField("count", &p) }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked with %v (%T), want an *vram.Error", r, r)
					}
				}()
				err = vram.Catch(func() { tc.call(t) })
			}()
			switch {
			case tc.fail && !errors.Is(err, vram.ErrArgument):
				t.Fatalf("got %v, want an error of kind ErrArgument", err)
			case tc.fail && !strings.Contains(err.Error(), "nil *Sequential"):
				t.Errorf("error %q does not name the nil *Sequential", err)
			case !tc.fail && err != nil:
				t.Errorf("got %v, want the answer of an empty Sequential", err)
			}
		})
	}
}

// TestSequentialModuleReturnsNil runs a Sequential one of whose modules
// (a caller's Func) returns a nil tensor: Forward panics with an
// *vram.Error of kind ErrArgument naming the module, whether the module is
// last, whose nil would have been the result, or followed by another,
// which would have failed on a nil input without saying where it came
// from.
func TestSequentialModuleReturnsNil(t *testing.T) {
	x := vram.Ones(vram.Shape{2, 3})
	defer x.Release()
	none := nn.Func(func(*vram.Tensor) *vram.Tensor { return nil })
	for _, tc := range []struct {
		name string
		s    *nn.Sequential
	}{
		{"alone", nn.NewSequential(none)},
		{"last", nn.NewSequential(nn.NewReLU(), none)},
		{"first", nn.NewSequential(none, nn.NewReLU())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var y *vram.Tensor
			err := vram.Catch(func() { y = tc.s.Forward(x) })
			if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), "returned a nil tensor") {
				t.Errorf("got %v and %v, want an error of kind ErrArgument saying which module returned nil", y, err)
			}
		})
	}
}
