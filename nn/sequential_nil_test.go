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
		call func() // checks what it must return, for the methods that read
		fail bool   // whether it must panic with ErrArgument
	}{
		{"Len", func() {
			if n := s.Len(); n != 0 {
				t.Errorf("Len() = %d, want 0", n)
			}
		}, false},
		{"Modules", func() {
			if m := s.Modules(); len(m) != 0 {
				t.Errorf("Modules() = %v, want none", m)
			}
		}, false},
		{"NamedModules", func() {
			if m := s.NamedModules(); len(m) != 0 {
				t.Errorf("NamedModules() = %v, want none", m)
			}
		}, false},
		{"NamedChildren", func() {
			if m := s.NamedChildren(); len(m) != 0 {
				t.Errorf("NamedChildren() = %v, want none", m)
			}
		}, false},
		{"NamedParameters", func() {
			if ps := s.NamedParameters(); len(ps) != 0 {
				t.Errorf("NamedParameters() = %v, want none", ps)
			}
		}, false},
		{"Parameters", func() {
			if ps := s.Parameters(); len(ps) != 0 {
				t.Errorf("Parameters() = %v, want none", ps)
			}
		}, false},
		{"NamedBuffers", func() {
			if bs := s.NamedBuffers(); len(bs) != 0 {
				t.Errorf("NamedBuffers() = %v, want none", bs)
			}
		}, false},
		{"Training", func() {
			if !s.Training() {
				t.Error("Training() = false, want true, as for a new Sequential")
			}
		}, false},
		{"StateDict", func() {
			if sd := nn.StateDict(s); len(sd) != 0 {
				t.Errorf("StateDict = %v, want none", sd)
			}
		}, false},
		{"Forward", func() { s.Forward(x) }, true},
		{"At", func() { s.At(0) }, true},
		{"Append", func() { s.Append(lin) }, true},
		{"To", func() { s.To(vram.CPU) }, true},
		{"CPU", func() { s.CPU() }, true},
		{"CUDA", func() { s.CUDA() }, true},
		{"ToDType", func() { s.ToDType(vram.Float64) }, true},
		{"Half", func() { s.Half() }, true},
		{"BFloat16", func() { s.BFloat16() }, true},
		{"Float", func() { s.Float() }, true},
		{"Train", func() { s.Train() }, true},
		{"Eval", func() { s.Eval() }, true},
		{"ZeroGrad", func() { s.ZeroGrad() }, true},
		{"RegisterModule", func() { s.RegisterModule("head", lin) }, true},
		{"RegisterParameter", func() { s.RegisterParameter("scale", p) }, true},
		{"RegisterParameterField", func() { s.RegisterParameterField("scale", &p) }, true},
		{"RegisterBuffer", func() { s.RegisterBuffer("count", p) }, true},
		{"RegisterBufferField", func() { s.RegisterBufferField("count", &p) }, true},
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
				err = vram.Catch(tc.call)
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
