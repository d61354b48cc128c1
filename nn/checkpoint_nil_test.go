package nn_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestCheckpointedWithoutModule calls the methods of a nil *Checkpointed
// and of a Checkpointed that wraps no module (its zero value, or one whose
// Module was set to nil or to a nil pointer), and the package's functions on them: those that
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
		{"nil *Linear", &nn.Checkpointed{Module: (*nn.Linear)(nil)}},
	} {
		c := tc.c
		for _, call := range []struct {
			name string
			fn   func(t *testing.T)
			fail bool
		}{
			{"Unwrap", func(t *testing.T) {
				if m := c.Unwrap(); m != nil {
					t.Errorf("Unwrap() = %v, want nil", m)
				}
			}, false},
			{"NamedParameters", func(t *testing.T) {
				if ps := c.NamedParameters(); len(ps) != 0 {
					t.Errorf("NamedParameters() = %v", ps)
				}
			}, false},
			{"Parameters", func(t *testing.T) {
				if ps := c.Parameters(); len(ps) != 0 {
					t.Errorf("Parameters() = %v", ps)
				}
			}, false},
			{"NamedChildren", func(t *testing.T) {
				if ms := c.NamedChildren(); len(ms) != 0 {
					t.Errorf("NamedChildren() = %v", ms)
				}
			}, false},
			{"Training", func(t *testing.T) {
				if !c.Training() {
					t.Error("Training() = false, want true")
				}
			}, false},
			{"NamedModules", func(t *testing.T) { nn.NamedModules(c) }, false},
			{"StateDict", func(t *testing.T) {
				if sd := nn.StateDict(c); len(sd) != 0 {
					t.Errorf("StateDict = %v", sd)
				}
			}, false},
			{"NumParameters", func(t *testing.T) { nn.NumParameters(c) }, false},
			{"Format", func(t *testing.T) { nn.Format(c) }, false},
			{"ConvertDType", func(t *testing.T) { nn.ConvertDType(c, vram.Float64) }, false},
			{"Release", func(t *testing.T) { nn.Release(c) }, false},
			{"Forward", func(t *testing.T) { c.Forward(x) }, true},
			{"To", func(t *testing.T) { c.To(vram.CPU) }, true},
			{"CPU", func(t *testing.T) { c.CPU() }, true},
			{"CUDA", func(t *testing.T) { c.CUDA() }, true},
			{"Train", func(t *testing.T) { c.Train() }, true},
			{"Eval", func(t *testing.T) { c.Eval() }, true},
		} {
			t.Run(tc.name+"/"+call.name, func(t *testing.T) {
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("panicked with %v (%T), want an *vram.Error", r, r)
						}
					}()
					err = vram.Catch(func() { call.fn(t) })
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
