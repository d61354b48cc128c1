package vram

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

// draws returns n uniform values drawn for a tensor on d from its default
// generator.
func draws(t *testing.T, d Device, n int) []float32 {
	t.Helper()
	x := Rand(Shape{n}, d)
	defer x.Release()
	return x.Float32s()
}

// TestDeviceGenerators: after ManualSeed every device draws a sequence of
// its own, fixed by the seed and the device, whatever draws other devices
// make in between; the CPU's is NewGenerator's.
func TestDeviceGenerators(t *testing.T) {
	defer ManualSeed(0)
	a, b := Sim(0), Sim(1)
	ManualSeed(11)
	alone := draws(t, a, 6)
	cpu := draws(t, CPU, 6)
	other := draws(t, b, 6)
	tests := []struct {
		name string
		run  func() []float32 // after ManualSeed(11), what sim:0 draws
	}{
		{"sim:0 alone", func() []float32 { return draws(t, a, 6) }},
		{"sim:1 and the CPU draw first", func() []float32 {
			draws(t, b, 17)
			draws(t, CPU, 5)
			return draws(t, a, 6)
		}},
		{"interleaved", func() []float32 {
			x := draws(t, a, 3)
			draws(t, b, 4)
			return append(x, draws(t, a, 3)...)
		}},
		{"a private generator draws meanwhile", func() []float32 {
			g := NewGenerator(11)
			Rand(Shape{9}, a, WithGenerator(g)).Release()
			return draws(t, a, 6)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ManualSeed(11)
			if got := tt.run(); !slices.Equal(got, alone) {
				t.Errorf("sim:0 drew %v, want %v", got, alone)
			}
		})
	}
	if slices.Equal(alone, other) || slices.Equal(alone, cpu) {
		t.Errorf("sim:0 %v, sim:1 %v and the CPU %v draw the same numbers", alone, other, cpu)
	}
	g := NewGenerator(11)
	for i, v := range cpu {
		if want := float32(g.Float64()); v != want {
			t.Errorf("CPU draw %d: %v, want NewGenerator(11)'s %v", i, v, want)
		}
	}
	// An explicit generator draws the same on every device.
	x := Rand(Shape{4}, a, WithGenerator(NewGenerator(3)))
	y := Rand(Shape{4}, CPU, WithGenerator(NewGenerator(3)))
	defer x.Release()
	defer y.Release()
	if !slices.Equal(x.Float32s(), y.Float32s()) {
		t.Errorf("NewGenerator(3) drew %v on sim:0, %v on the CPU", x.Float32s(), y.Float32s())
	}
}

// TestManualSeedScopes: ManualSeed seeds every device, ManualSeedAll every
// device but the CPU (including devices not used yet), ManualSeedDevice
// one device.
func TestManualSeedScopes(t *testing.T) {
	defer ManualSeed(0)
	fresh := func(d Device, seed uint64) []byte {
		if d == CPU {
			return NewGenerator(seed).State()
		}
		return newGeneratorOn(seed, deviceStream(d)).State()
	}
	later := CUDA(7) // never opened: a device used later
	devs := []Device{CPU, Sim(0), Sim(1), later}
	tests := []struct {
		name string
		seed func() error
		want map[Device]uint64 // each device's seed afterwards
	}{
		{"ManualSeed", func() error { ManualSeed(4); return nil },
			map[Device]uint64{CPU: 4, Sim(0): 4, Sim(1): 4, later: 4}},
		{"ManualSeedAll", func() error { ManualSeedAll(4); return nil },
			map[Device]uint64{CPU: 1, Sim(0): 4, Sim(1): 4, later: 4}},
		{"ManualSeedDevice sim:1", func() error { return ManualSeedDevice(Sim(1), 4) },
			map[Device]uint64{CPU: 1, Sim(0): 1, Sim(1): 4, later: 1}},
		{"ManualSeedDevice cpu", func() error { return ManualSeedDevice(CPU, 4) },
			map[Device]uint64{CPU: 4, Sim(0): 1, Sim(1): 1, later: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ManualSeed(1)
			for _, d := range devs[:3] {
				draws(t, d, 3) // move every used generator on
			}
			ManualSeed(1)
			if err := tt.seed(); err != nil {
				t.Fatal(err)
			}
			for _, d := range devs {
				st, err := RNGStateDevice(d)
				if err != nil {
					t.Fatal(err)
				}
				if want := fresh(d, tt.want[d]); !slices.Equal(st, want) {
					t.Errorf("%s: not in the state of a generator seeded with %d", d, tt.want[d])
				}
				g, _ := DeviceGenerator(d)
				if got := g.InitialSeed(); got != tt.want[d] {
					t.Errorf("%s: InitialSeed %d, want %d", d, got, tt.want[d])
				}
			}
			if got := InitialSeed(); got != tt.want[CPU] {
				t.Errorf("InitialSeed %d, want %d", got, tt.want[CPU])
			}
		})
	}
}

// TestDeviceRNGState: a device's state, restored, repeats its draws and
// leaves other devices alone; bad devices and states are refused with
// ErrArgument and change nothing.
func TestDeviceRNGState(t *testing.T) {
	defer ManualSeed(0)
	ManualSeed(5)
	d := Sim(1)
	st, err := RNGStateDevice(d)
	if err != nil {
		t.Fatal(err)
	}
	want := draws(t, d, 5)
	cpuBefore := RNGState()
	if err := SetRNGStateDevice(d, st); err != nil {
		t.Fatal(err)
	}
	if got := draws(t, d, 5); !slices.Equal(got, want) {
		t.Errorf("after SetRNGStateDevice sim:1 drew %v, want %v", got, want)
	}
	if !slices.Equal(RNGState(), cpuBefore) {
		t.Errorf("SetRNGStateDevice(sim:1) changed the CPU's generator")
	}

	bad := []struct {
		name string
		call func() error
	}{
		{"unknown kind", func() error { return ManualSeedDevice(Device{Kind: "gpu"}, 1) }},
		{"empty device", func() error { _, err := DeviceGenerator(Device{}); return err }},
		{"negative index", func() error { _, err := RNGStateDevice(Sim(-1)); return err }},
		{"cpu:1", func() error { return ManualSeedDevice(Device{Kind: "cpu", Index: 1}, 1) }},
		{"garbage state", func() error { return SetRNGStateDevice(d, []byte("not a state")) }},
		{"bad device with a good state", func() error { return SetRNGStateDevice(Device{Kind: "tpu"}, st) }},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := RNGStateDevice(d)
			err := tt.call()
			if !errors.Is(err, ErrArgument) {
				t.Fatalf("got %v, want an error wrapping ErrArgument", err)
			}
			if after, _ := RNGStateDevice(d); !slices.Equal(before, after) {
				t.Errorf("a refused call changed sim:1's generator")
			}
		})
	}
}

// TestDeviceGeneratorsConcurrent: goroutines drawing at once on different
// devices, one per device, draw what each would draw alone, and seeding
// and reading states meanwhile is safe (run with -race).
func TestDeviceGeneratorsConcurrent(t *testing.T) {
	defer ManualSeed(0)
	devs := []Device{CPU, Sim(0), Sim(1)}
	run := func() [][]float32 {
		ManualSeed(21)
		out := make([][]float32, len(devs))
		var wg sync.WaitGroup
		for i, d := range devs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					x := Rand(Shape{3}, d)
					out[i] = append(out[i], x.Float32s()...)
					x.Release()
				}
			}()
		}
		wg.Wait()
		return out
	}
	want := run()
	for range 3 {
		got := run()
		for i, d := range devs {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("%s drew %v, then %v", d, want[i], got[i])
			}
		}
	}

	// Seeding, reading and restoring states from several goroutines while
	// others draw.
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := Device{Kind: "sim", Index: w % 2}
			for i := range 30 {
				switch (w + i) % 4 {
				case 0:
					Rand(Shape{2}, d).Release()
				case 1:
					ManualSeedAll(uint64(i))
				case 2:
					if st, err := RNGStateDevice(d); err != nil {
						t.Error(err)
					} else if err := SetRNGStateDevice(d, st); err != nil {
						t.Error(err)
					}
				default:
					if _, err := DeviceGenerator(Device{Kind: "cuda", Index: i % 3}); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
}
