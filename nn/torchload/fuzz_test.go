package torchload

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/fuzztest"
	"github.com/vramgo/vram/nn"
)

// maxFuzzInput bounds the fuzz inputs, in bytes: room for a small state
// dict with a few storages.
const maxFuzzInput = 8 << 10

// Memory a read of a fuzz input may allocate: buffers (the zip reader's,
// the decoder's) plus a multiple of the input, with Options.MaxBytes at
// fuzzMaxBytes for the tensors.
const (
	fuzzMaxBytes = 1 << 20
	allocFixed   = 16 << 20
	allocPerByte = 2 << 10
)

// FuzzReadStateDict reads arbitrary files as torch.save archives: a bad
// one gives an error matching vram.ErrArgument or vram.ErrDType, never a
// panic, and no read allocates more than the bound; an accepted one has
// valid CPU tensors.
func FuzzReadStateDict(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.Args[0].([]byte))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		before := fuzztest.HeapAllocated()
		sd, err := ReadStateDict(bytes.NewReader(data), int64(len(data)), Options{MaxBytes: fuzzMaxBytes})
		fuzztest.CheckAllocated(t, "ReadStateDict", len(data), before, allocFixed, allocPerByte)
		if err != nil {
			if !errors.Is(err, vram.ErrArgument) && !errors.Is(err, vram.ErrDType) {
				t.Fatalf("error %v matches neither vram.ErrArgument nor vram.ErrDType", err)
			}
			if sd != nil {
				t.Fatal("a state dict with an error")
			}
			return
		}
		defer sd.Release()
		seen := map[string]bool{}
		for _, e := range sd {
			if seen[e.Key] {
				t.Fatalf("key %q twice", e.Key)
			}
			seen[e.Key] = true
			if e.Err != nil {
				if e.Tensor != nil || (!errors.Is(e.Err, vram.ErrDType) && !errors.Is(e.Err, vram.ErrArgument)) {
					t.Fatalf("%q: tensor %v beside error %v", e.Key, e.Tensor, e.Err)
				}
				continue
			}
			if e.Tensor.Device() != vram.CPU || !e.Tensor.IsContiguous() {
				t.Fatalf("%q: on %s, contiguous %v", e.Key, e.Tensor.Device(), e.Tensor.IsContiguous())
			}
			_ = e.Tensor.RawBytes()
		}
	})
}

// fuzzSeeds builds the seed corpus of FuzzReadStateDict.
func fuzzSeeds(t testing.TB) []fuzztest.Seed {
	store := map[string][]byte{"0": le(seq(6)), "1": le([]int64{3})}
	sd := odict{
		{"fc.weight", tens{key: "0", class: "FloatStorage", numel: 6, size: []int64{3, 2}, stride: []int64{1, 3}}},
		{"fc.bias", tens{key: "0", class: "FloatStorage", numel: 6, offset: 4, size: []int64{2}, stride: []int64{1}, param: true}},
		{"bn.num_batches_tracked", tens{key: "1", class: "LongStorage", numel: 1, size: []int64{}, stride: []int64{}}},
	}
	ddp := odict{{"module.w", tens{key: "0", class: "UntypedStorage", numel: 24, size: []int64{2}, stride: []int64{2}, v3: "float32"}}}
	nested := pdict{{"epoch", 3}, {"model", sd}, {"optimizer", pdict{{"param_groups", []any{pdict{{"lr", 0.1}, {"betas", tup{0.9, 0.999}}}}}}}}
	full := archiveOf(t, sd, store)
	return []fuzztest.Seed{
		{Name: "state-dict", Args: []any{full}},
		{Name: "ddp-untyped", Args: []any{archiveOf(t, ddp, store)}},
		{Name: "nested", Args: []any{archiveOf(t, nested, store)}},
		{Name: "os-system", Args: []any{withPickle(t, raw(globalOp("os", "system"), []byte("X\x02\x00\x00\x00ls\x85R")))}},
		{Name: "expanded", Args: []any{archiveOf(t, odict{{"w", tens{key: "1", class: "LongStorage", numel: 1, size: []int64{1 << 20, 1 << 20}, stride: []int64{0, 0}}}}, store)}},
		{Name: "cut", Args: []any{full[:len(full)/2]}},
		{Name: "legacy", Args: []any{legacyOf(nested, store, map[string]int{"0": 4, "1": 8})}},
		{Name: "float8", Args: []any{archiveOf(t, odict{{"w", tens{key: "0", class: "UntypedStorage", numel: 24, size: []int64{2, 3}, stride: []int64{3, 1}, v3: "float8_e4m3fn"}}}, store)}},
	}
}

// TestFuzzSeeds checks the committed seed corpus against fuzzSeeds (run
// with -update-fuzz-seeds to rewrite it) and that the valid seeds read.
func TestFuzzSeeds(t *testing.T) {
	seeds := fuzzSeeds(t)
	fuzztest.Check(t, "FuzzReadStateDict", seeds, maxFuzzInput)
	for _, s := range seeds[:3] {
		b := s.Args[0].([]byte)
		sd, err := ReadStateDict(bytes.NewReader(b), int64(len(b)), Options{})
		if err != nil {
			t.Errorf("seed %s: %v", s.Name, err)
			continue
		}
		sd.Release()
	}
}

// FuzzLoadPyTorch loads arbitrary files into a small model as torch.save
// checkpoints, which LoadPyTorch reads without building tensors of them: a
// bad one gives an error matching vram.ErrArgument, vram.ErrDType or
// vram.ErrShape, never a panic, that leaves the model as it was, and the
// model's tensors stay valid.
func FuzzLoadPyTorch(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.Args[0].([]byte))
	}
	m := nn.NewSequential(nn.NewLinear(3, 2), nn.NewBatchNorm1d(2))
	defer nn.Release(m)
	path := filepath.Join(f.TempDir(), "m.pt")
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, strict := range []bool{false, true} {
			before := map[string][]byte{}
			for k, x := range nn.StateDict(m) {
				before[k] = x.RawBytes()
			}
			_, err := LoadPyTorchOptions(m, path, strict, Options{MaxBytes: fuzzMaxBytes})
			if err == nil {
				continue
			}
			if !errors.Is(err, vram.ErrArgument) && !errors.Is(err, vram.ErrDType) && !errors.Is(err, vram.ErrShape) {
				t.Fatalf("strict %v: error %v matches none of vram.ErrArgument, vram.ErrDType and vram.ErrShape", strict, err)
			}
			for k, x := range nn.StateDict(m) {
				if !bytes.Equal(x.RawBytes(), before[k]) {
					t.Fatalf("strict %v: %s changed by a load that failed with %v", strict, k, err)
				}
			}
		}
		for k, x := range nn.StateDict(m) {
			if x.Released() {
				t.Fatalf("%s released", k)
			}
			_ = x.RawBytes()
		}
	})
}
