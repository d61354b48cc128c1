package nn_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestCheckpointedWithoutModule calls the methods of a nil *Checkpointed
// and of a Checkpointed that wraps no module (its zero value, or one whose
// Module was set to nil), and the package's functions on them: those that
// read answer as for a module without parameters, and Forward and the
// methods that move or switch the module panic with an *vram.Error of
// kind ErrArgument, never with a nil-pointer dereference.
func TestCheckpointedWithoutModule(t *testing.T) {
	x := vram.Ones(vram.Shape{2, 2})
	defer x.Release()
	for _, tc := range []struct {
		name string
		c    *nn.Checkpointed
	}{
		{"nil", nil},
		{"zero value", &nn.Checkpointed{}},
	} {
		c := tc.c
		for _, call := range []struct {
			name string
			fn   func()
			fail bool
		}{
			{"Unwrap", func() {
				if m := c.Unwrap(); m != nil {
					t.Errorf("Unwrap() = %v, want nil", m)
				}
			}, false},
			{"NamedParameters", func() {
				if ps := c.NamedParameters(); len(ps) != 0 {
					t.Errorf("NamedParameters() = %v", ps)
				}
			}, false},
			{"Parameters", func() {
				if ps := c.Parameters(); len(ps) != 0 {
					t.Errorf("Parameters() = %v", ps)
				}
			}, false},
			{"NamedChildren", func() {
				if ms := c.NamedChildren(); len(ms) != 0 {
					t.Errorf("NamedChildren() = %v", ms)
				}
			}, false},
			{"Training", func() {
				if !c.Training() {
					t.Error("Training() = false, want true")
				}
			}, false},
			{"NamedModules", func() { nn.NamedModules(c) }, false},
			{"StateDict", func() {
				if sd := nn.StateDict(c); len(sd) != 0 {
					t.Errorf("StateDict = %v", sd)
				}
			}, false},
			{"NumParameters", func() { nn.NumParameters(c) }, false},
			{"Format", func() { nn.Format(c) }, false},
			{"ConvertDType", func() { nn.ConvertDType(c, vram.Float64) }, false},
			{"Release", func() { nn.Release(c) }, false},
			{"Forward", func() { c.Forward(x) }, true},
			{"To", func() { c.To(vram.CPU) }, true},
			{"CPU", func() { c.CPU() }, true},
			{"CUDA", func() { c.CUDA() }, true},
			{"Train", func() { c.Train() }, true},
			{"Eval", func() { c.Eval() }, true},
		} {
			t.Run(tc.name+"/"+call.name, func(t *testing.T) {
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("panicked with %v (%T), want an *vram.Error", r, r)
						}
					}()
					err = vram.Catch(call.fn)
				}()
				switch {
				case call.fail && !errors.Is(err, vram.ErrArgument):
					t.Errorf("got %v, want an error of kind ErrArgument", err)
				case !call.fail && err != nil:
					t.Errorf("got %v, want no error", err)
				}
			})
		}
	}
}
