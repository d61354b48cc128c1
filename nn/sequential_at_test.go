package nn_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestSequentialAt checks model[i]: indices from the front and, negative,
// from the back, and an ErrIndex error rather than a runtime panic for an
// index past either end.
func TestSequentialAt(t *testing.T) {
	lin, relu, out := nn.NewLinear(2, 3), nn.NewReLU(), nn.NewLinear(3, 1)
	defer nn.Release(lin)
	defer nn.Release(out)
	s := nn.NewSequential(lin, relu, out)
	cases := []struct {
		i    int
		want nn.Module
		err  error
	}{
		{0, lin, nil},
		{1, relu, nil},
		{2, out, nil},
		{-1, out, nil},
		{-3, lin, nil},
		{3, nil, vram.ErrIndex},
		{-4, nil, vram.ErrIndex},
	}
	for _, c := range cases {
		var got nn.Module
		err := vram.Catch(func() { got = s.At(c.i) })
		if !errors.Is(err, c.err) || err == nil && c.err != nil {
			t.Errorf("At(%d): error %v, want %v", c.i, err, c.err)
			continue
		}
		if got != c.want {
			t.Errorf("At(%d) = %T %p, want %T %p", c.i, got, got, c.want, c.want)
		}
	}
	if err := vram.Catch(func() { nn.NewSequential().At(0) }); !errors.Is(err, vram.ErrIndex) {
		t.Errorf("At(0) of an empty Sequential: %v, want ErrIndex", err)
	}
}
