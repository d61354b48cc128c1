package vram

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
)

// generatorMagic starts every generator state that [Generator.State]
// returns; the byte after it is the version of the layout that follows.
const generatorMagic = "vram.gen"

// generatorStateVersion is the version of the state layout State writes:
// the magic, this byte, the state of the generator's PCG source as
// math/rand/v2's PCG.MarshalBinary encodes it, then the generator's seed
// ([Generator.InitialSeed]) as 8 little-endian bytes. Version 1 had no
// seed; SetState still reads it.
const generatorStateVersion = 2

// generatorSeedBytes is the length of the seed at the end of a state of
// version 2.
const generatorSeedBytes = 8

// State returns the generator's state, a value [Generator.SetState] takes
// to make this or another generator draw the same numbers from then on
// (torch.Generator.get_state). It is a few dozen bytes, versioned, and
// the same on every platform, so it can go into a checkpoint file. Taking
// it draws nothing. It holds the generator's seed too, which SetState
// restores.
func (g *Generator) State() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := []byte(generatorMagic)
	b = append(b, generatorStateVersion)
	b = append(b, g.sourceState()...)
	return binary.LittleEndian.AppendUint64(b, g.seed)
}

// SetState puts the generator in the state st that [Generator.State]
// returned, so that its next draws are those that followed State, and its
// [Generator.InitialSeed] is that of the generator State was called on
// (torch.Generator.set_state). It returns an error wrapping
// [ErrArgument], leaving the generator as it was, for a state that State
// did not return (empty, truncated, of another version or corrupted).
func (g *Generator) SetState(st []byte) error {
	src, seed, hasSeed, err := decodeGeneratorState(st)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.ready() // a zero g takes NewGenerator(0)'s stream and seed
	g.src, g.rng = src, rand.New(src)
	if hasSeed {
		g.seed = seed
	}
	g.mu.Unlock()
	return nil
}

// decodeGeneratorState returns the source that the state st holds, and
// its seed where it has one (hasSeed, version 2 on).
func decodeGeneratorState(st []byte) (src *rand.PCG, seed uint64, hasSeed bool, err error) {
	bad := func(format string, args ...any) error {
		return &Error{Op: "generator set state", Kind: ErrArgument, Detail: fmt.Sprintf(format, args...)}
	}
	rest, ok := bytes.CutPrefix(st, []byte(generatorMagic))
	switch {
	case len(st) == 0:
		return nil, 0, false, bad("empty state; pass what Generator.State returned")
	case !ok:
		return nil, 0, false, bad("%d bytes that are not a generator state (they do not start with %q)", len(st), generatorMagic)
	case len(rest) == 0:
		return nil, 0, false, bad("the state is truncated after its header")
	case rest[0] != 1 && rest[0] != generatorStateVersion:
		return nil, 0, false, bad("state version %d; this vram reads versions 1 to %d", rest[0], generatorStateVersion)
	}
	body := rest[1:]
	if rest[0] >= 2 {
		if len(body) < generatorSeedBytes {
			return nil, 0, false, bad("the state is truncated: %d bytes after its header, fewer than its seed's %d", len(body), generatorSeedBytes)
		}
		cut := len(body) - generatorSeedBytes
		body, seed, hasSeed = body[:cut], binary.LittleEndian.Uint64(body[cut:]), true
	}
	src = rand.NewPCG(0, 0)
	if err := src.UnmarshalBinary(body); err != nil {
		return nil, 0, false, &Error{Op: "generator set state", Kind: ErrArgument,
			Detail: fmt.Sprintf("the state's %d bytes of source state are truncated or corrupted", len(body)), Err: err}
	}
	return src, seed, hasSeed, nil
}

// RNGState returns the state of the CPU's default generator
// (torch.get_rng_state), for a checkpoint: [SetRNGState] with it makes
// that generator, and so every draw that uses it (random factories for CPU
// tensors without [WithGenerator], dropout on the CPU, a data loader's
// shuffling without a generator of its own), continue as it would have.
// Other devices' generators have states of their own ([RNGStateDevice]).
func RNGState() []byte { return defaultGen.State() }

// SetRNGState restores the CPU's default generator to the state st that
// [RNGState] (or a generator's [Generator.State]) returned
// (torch.set_rng_state). It returns an error wrapping [ErrArgument],
// changing nothing, for a state that is not one.
func SetRNGState(st []byte) error { return defaultGen.SetState(st) }
