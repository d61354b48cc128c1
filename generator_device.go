package vram

import (
	"fmt"
	"hash/fnv"
	"strings"
	"sync"

	"github.com/vramgo/vram/backend"
)

// Each device has a default generator of its own, as PyTorch keeps one for
// the CPU and one per CUDA device: a random factory (and so dropout) with
// no [WithGenerator] option draws from the generator of the device the
// tensor is made on. Goroutines that draw at once on different devices
// (data-parallel replicas, pipeline stages) then each see their device's
// numbers in their own order, and a run seeded with [ManualSeed] repeats
// bit for bit however the goroutines interleave.
//
// A device's generator starts from the seed [ManualSeedAll] (or
// [ManualSeed]) last gave, 0 before any, and from the device: the CPU's
// draws what [NewGenerator] of that seed draws, every other device a
// sequence of its own, derived from the seed and the device's name.

// deviceGens holds the default generator of every device other than the
// CPU that drew or was asked for; the CPU's is defaultGen.
var deviceGens struct {
	mu   sync.Mutex
	seed uint64 // the seed of generators made from now on
	gens map[Device]*Generator
}

// deviceStream returns the second word of the PCG seed of d's default
// generator: cpuStream for the CPU, a hash of d's name otherwise.
func deviceStream(d Device) uint64 {
	if d == CPU {
		return cpuStream
	}
	h := fnv.New64a()
	h.Write([]byte("vram default generator " + d.String()))
	// splitmix64's finalizer spreads the hash over all bits.
	z := h.Sum64()
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// deviceGen returns d's default generator, making it on first use.
func deviceGen(d Device) *Generator {
	if d == CPU {
		return defaultGen
	}
	deviceGens.mu.Lock()
	defer deviceGens.mu.Unlock()
	g := deviceGens.gens[d]
	if g == nil {
		if deviceGens.gens == nil {
			deviceGens.gens = map[Device]*Generator{}
		}
		g = newGeneratorOn(deviceGens.seed, deviceStream(d))
		deviceGens.gens[d] = g
	}
	return g
}

// checkGeneratorDevice returns an error wrapping [ErrArgument] unless d
// names a device of a backend in this program: the CPU, or a registered
// kind with an index of 0 or more. It does not open the device.
func checkGeneratorDevice(op string, d Device) error {
	if d == CPU {
		return nil
	}
	if _, ok := backend.Lookup(d.Kind); !ok || d.Kind == "cpu" || d.Index < 0 {
		return &Error{Op: op, Kind: ErrArgument,
			Detail: fmt.Sprintf("%s is not a device (kinds: %s, with an index of 0 or more; the CPU is vram.CPU)", d, strings.Join(backend.Names(), ", "))}
	}
	return nil
}

// DeviceGenerator returns the default generator of device d
// (torch.cuda.default_generators[i]); for [CPU] it is [DefaultGenerator].
// Random factories draw from it for tensors on d when no [WithGenerator]
// option is given. d need not be available: seeding a device that does not
// exist is harmless, as in PyTorch. It returns an error wrapping
// [ErrArgument] when d is not a device of a kind this program has.
func DeviceGenerator(d Device) (*Generator, error) {
	if err := checkGeneratorDevice("device generator", d); err != nil {
		return nil, err
	}
	return deviceGen(d), nil
}

// ManualSeedAll seeds the default generator of every device other than the
// CPU (torch.cuda.manual_seed_all), those used so far and those used
// later, each from seed and the device's name, so that two devices draw
// different numbers. The CPU's generator keeps its state; [ManualSeed]
// seeds it too.
func ManualSeedAll(seed uint64) {
	deviceGens.mu.Lock()
	defer deviceGens.mu.Unlock()
	deviceGens.seed = seed
	for _, g := range deviceGens.gens {
		g.ManualSeed(seed)
	}
}

// ManualSeedDevice seeds the default generator of device d alone
// (torch.cuda.manual_seed, for a device named rather than the current
// one); [CPU] seeds [DefaultGenerator]. It returns an error wrapping
// [ErrArgument], seeding nothing, when d is not a device of a kind this
// program has.
func ManualSeedDevice(d Device, seed uint64) error {
	g, err := DeviceGenerator(d)
	if err != nil {
		return err
	}
	g.ManualSeed(seed)
	return nil
}

// InitialSeed returns the seed of the CPU's default generator
// (torch.initial_seed): 0, or what [ManualSeed] last gave.
func InitialSeed() uint64 { return defaultGen.InitialSeed() }

// RNGStateDevice returns the state of device d's default generator
// (torch.cuda.get_rng_state), which [SetRNGStateDevice] restores; for
// [CPU] it is [RNGState]. It returns an error wrapping [ErrArgument] when d
// is not a device of a kind this program has.
func RNGStateDevice(d Device) ([]byte, error) {
	g, err := DeviceGenerator(d)
	if err != nil {
		return nil, err
	}
	return g.State(), nil
}

// SetRNGStateDevice restores device d's default generator to the state st
// that [RNGStateDevice] returned (torch.cuda.set_rng_state). It returns an
// error wrapping [ErrArgument], changing nothing, when d is not a device
// of a kind this program has or st is not a generator state.
func SetRNGStateDevice(d Device, st []byte) error {
	g, err := DeviceGenerator(d)
	if err != nil {
		return err
	}
	return g.SetState(st)
}
