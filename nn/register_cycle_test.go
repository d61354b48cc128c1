package nn_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestRegisterModuleRefusesCycles: registering a module inside itself,
// directly, through other modules or through a wrapper, or a nil pointer
// as a module, panics with vram.ErrArgument and leaves the module as it
// was, rather than making a cycle that NamedParameters walks until the
// stack overflows; a module shared by two parents is still accepted.
func TestRegisterModuleRefusesCycles(t *testing.T) {
	tests := []struct {
		name string
		// build returns the module to append to and the one to append.
		build   func() (*nn.Sequential, nn.Module)
		refused bool
	}{
		{"itself", func() (*nn.Sequential, nn.Module) {
			s := nn.NewSequential(nn.NewLinear(2, 2))
			return s, s
		}, true},
		{"a module holding it", func() (*nn.Sequential, nn.Module) {
			a := nn.NewSequential(nn.NewLinear(2, 2))
			return a, nn.NewSequential(nn.NewReLU(), a)
		}, true},
		{"a module holding it two levels down", func() (*nn.Sequential, nn.Module) {
			a := nn.NewSequential(nn.NewLinear(2, 2))
			return a, nn.NewSequential(nn.NewSequential(nn.NewTanh(), a))
		}, true},
		{"itself checkpointed", func() (*nn.Sequential, nn.Module) {
			a := nn.NewSequential(nn.NewLinear(2, 2))
			return a, nn.Checkpoint(a)
		}, true},
		{"a nil pointer", func() (*nn.Sequential, nn.Module) {
			return nn.NewSequential(nn.NewLinear(2, 2)), (*nn.Linear)(nil)
		}, true},
		{"a layer shared with another module", func() (*nn.Sequential, nn.Module) {
			shared := nn.NewLinear(2, 2)
			nn.NewSequential(shared)
			return nn.NewSequential(nn.NewLinear(2, 2)), shared
		}, false},
		{"a sibling holding a shared layer", func() (*nn.Sequential, nn.Module) {
			shared := nn.NewLinear(2, 2)
			return nn.NewSequential(shared), nn.NewSequential(shared, nn.NewReLU())
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, m := tc.build()
			n, params := s.Len(), len(s.Parameters())
			err := vram.Catch(func() { s.Append(m) })
			if !tc.refused {
				if err != nil {
					t.Fatalf("Append: %v", err)
				}
				if s.Len() != n+1 {
					t.Fatalf("Len %d after Append, want %d", s.Len(), n+1)
				}
				return
			}
			if !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("Append gave %v, want an error matching vram.ErrArgument", err)
			}
			if s.Len() != n || len(s.Parameters()) != params || len(s.NamedChildren()) != n {
				t.Errorf("after the refused Append: %d modules, %d children, %d parameters; want %d, %d, %d",
					s.Len(), len(s.NamedChildren()), len(s.Parameters()), n, n, params)
			}
		})
	}
}
