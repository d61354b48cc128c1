package vram

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

// TestGeneratorStateResumes: a generator given the state another had
// draws what the other drew after it, by Float64 and by random factories,
// and taking the state draws nothing.
func TestGeneratorStateResumes(t *testing.T) {
	tests := []struct {
		name  string
		seed  uint64
		drawn int // draws before the state is taken
	}{
		{"fresh", 0, 0},
		{"after draws", 7, 5},
		{"large seed", 1 << 63, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGenerator(tc.seed)
			for range tc.drawn {
				g.Float64()
			}
			st := g.State()
			if again := g.State(); !slices.Equal(st, again) {
				t.Fatalf("State changed the state: %x then %x", st, again)
			}
			want := []float64{g.Float64(), g.Float64()}
			r := Randn(Shape{4}, Float64, WithGenerator(g))
			defer r.Release()

			h := NewGenerator(tc.seed + 1)
			if err := h.SetState(st); err != nil {
				t.Fatal(err)
			}
			got := []float64{h.Float64(), h.Float64()}
			if !slices.Equal(got, want) {
				t.Errorf("after SetState drew %v, want %v", got, want)
			}
			r2 := Randn(Shape{4}, Float64, WithGenerator(h))
			defer r2.Release()
			if !slices.Equal(r2.Float64s(), r.Float64s()) {
				t.Errorf("Randn after SetState gave %v, want %v", r2.Float64s(), r.Float64s())
			}
		})
	}
}

// TestRNGState: SetRNGState rewinds the default generator, and so the
// draws of factories that use it.
func TestRNGState(t *testing.T) {
	defer ManualSeed(0)
	ManualSeed(3)
	Rand(Shape{3}).Release()
	st := RNGState()
	a := Rand(Shape{5})
	defer a.Release()
	ManualSeed(99)
	if err := SetRNGState(st); err != nil {
		t.Fatal(err)
	}
	b := Rand(Shape{5})
	defer b.Release()
	if !slices.Equal(a.Float32s(), b.Float32s()) {
		t.Errorf("after SetRNGState Rand gave %v, want %v", b.Float32s(), a.Float32s())
	}
}

// TestGeneratorSetStateRefuses: a state that State did not return is
// refused with ErrArgument, and the generator goes on as before.
func TestGeneratorSetStateRefuses(t *testing.T) {
	good := NewGenerator(1).State()
	tests := []struct {
		name string
		st   []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"not a state", []byte("hello, world, this is not a state")},
		{"header only", good[:len(generatorMagic)]},
		{"truncated", good[:len(good)-1]},
		{"one byte more", append(slices.Clone(good), 0)},
		{"other version", func() []byte {
			b := slices.Clone(good)
			b[len(generatorMagic)] = generatorStateVersion + 1
			return b
		}()},
		{"corrupted source", func() []byte {
			b := slices.Clone(good)
			b[len(generatorMagic)+1] ^= 0xff
			return b
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGenerator(42)
			g.Float64()
			ref := NewGenerator(42)
			ref.Float64()
			err := g.SetState(tc.st)
			if !errors.Is(err, ErrArgument) {
				t.Fatalf("SetState(%q) = %v, want an error matching ErrArgument", tc.st, err)
			}
			if got, want := g.Float64(), ref.Float64(); got != want {
				t.Errorf("after a refused SetState drew %v, want %v as before", got, want)
			}
		})
	}
}

// TestGeneratorStateConcurrent: State and SetState race with draws
// without corrupting the generator (run under -race).
func TestGeneratorStateConcurrent(t *testing.T) {
	g := NewGenerator(5)
	st := g.State()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				switch w % 3 {
				case 0:
					g.Float64()
				case 1:
					if err := g.SetState(st); err != nil {
						t.Error(err)
						return
					}
				default:
					if _, _, _, err := decodeGeneratorState(g.State()); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestGeneratorStateKeepsSeed: a state carries the seed its generator was
// made or last seeded with, and SetState restores it, as
// torch.Generator.set_state does (initial_seed() then returns the seed of
// the generator the state came from); a state of the first layout, which
// has no seed, leaves the seed as it was.
func TestGeneratorStateKeepsSeed(t *testing.T) {
	defer ManualSeed(0)
	v1 := func(g *Generator) []byte {
		return append(append([]byte(generatorMagic), 1), g.state()...)
	}
	tests := []struct {
		name string
		// set takes the state of a generator seeded with 5 and returns
		// the seed of the generator it was set on, seeded with 9 before.
		set func(st []byte) (uint64, error)
		st  func(g *Generator) []byte
		// want is the seed after set
		want uint64
	}{
		{"Generator", func(st []byte) (uint64, error) {
			g := NewGenerator(9)
			err := g.SetState(st)
			return g.InitialSeed(), err
		}, (*Generator).State, 5},
		{"zero Generator", func(st []byte) (uint64, error) {
			var g Generator
			g.ManualSeed(9)
			err := g.SetState(st)
			return g.InitialSeed(), err
		}, (*Generator).State, 5},
		{"SetRNGState", func(st []byte) (uint64, error) {
			ManualSeed(9)
			err := SetRNGState(st)
			return InitialSeed(), err
		}, (*Generator).State, 5},
		{"SetRNGStateDevice", func(st []byte) (uint64, error) {
			if err := ManualSeedDevice(Sim(0), 9); err != nil {
				return 0, err
			}
			if err := SetRNGStateDevice(Sim(0), st); err != nil {
				return 0, err
			}
			g, err := DeviceGenerator(Sim(0))
			if err != nil {
				return 0, err
			}
			return g.InitialSeed(), nil
		}, (*Generator).State, 5},
		{"first layout", func(st []byte) (uint64, error) {
			g := NewGenerator(9)
			err := g.SetState(st)
			return g.InitialSeed(), err
		}, v1, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := NewGenerator(5)
			src.Float64()
			st := tc.st(src)
			want := src.Float64()
			seed, err := tc.set(st)
			if err != nil {
				t.Fatal(err)
			}
			if seed != tc.want {
				t.Errorf("InitialSeed after SetState = %d, want %d", seed, tc.want)
			}
			g := NewGenerator(0)
			if err := g.SetState(st); err != nil {
				t.Fatal(err)
			}
			if got := g.Float64(); got != want {
				t.Errorf("after SetState drew %v, want %v", got, want)
			}
		})
	}
}
