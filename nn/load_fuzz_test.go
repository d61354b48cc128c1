package nn_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/fuzztest"
	"github.com/vramgo/vram/internal/safetensors"
	"github.com/vramgo/vram/internal/tensorfile"
	"github.com/vramgo/vram/nn"
)

// maxLoadFuzzFile bounds the files FuzzLoad loads: room for the state of
// fuzzModel and some more.
const maxLoadFuzzFile = 4 << 10

// fuzzModel returns the model FuzzLoad loads files into: parameters and
// buffers of float32, float16 and int64, a BatchNorm1d whose
// num_batches_tracked a file may lack, and a weight that two layers share
// ("0.weight" and "1.weight").
// Its weights come from a generator of its own, so that they, and the
// seed files made of them, are the same whatever ran before.
func fuzzModel() nn.Module {
	gen := vram.WithGenerator(vram.NewGenerator(1))
	e := nn.NewEmbedding(3, 2, gen)
	h := nn.NewLinearNoBias(2, 3, gen)
	h.Weight.Release()
	h.Weight = e.Weight
	return nn.NewSequential(e, h, nn.NewBatchNorm1d(2, gen), nn.NewLinear(2, 1, vram.Float16, gen))
}

// stateBytes returns the bytes of each tensor of m's state dict.
func stateBytes(m nn.Module) map[string][]byte {
	out := map[string][]byte{}
	for k, t := range nn.StateDict(m) {
		out[k] = t.RawBytes()
	}
	return out
}

// FuzzLoad checks Load and LoadNonStrict of any file into fuzzModel: they
// return an error or load, never panic; a failed load changes nothing;
// and a load that succeeds leaves each tensor of the model the file holds
// with the file's values in the model's dtype, as tensorfile.Decode gives
// them. Seeds are in testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	path := filepath.Join(f.TempDir(), "in.safetensors")
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > maxLoadFuzzFile {
			return
		}
		if err := os.WriteFile(path, in, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, strict := range []bool{true, false} {
			m := fuzzModel()
			before := stateBytes(m)
			var err error
			if p := vram.Catch(func() {
				if strict {
					err = nn.Load(m, path)
				} else {
					_, err = nn.LoadNonStrict(m, path)
				}
			}); p != nil {
				t.Fatalf("strict %v: panicked: %v", strict, p)
			}
			after := stateBytes(m)
			if err != nil {
				for k, b := range before {
					if !bytes.Equal(after[k], b) {
						t.Fatalf("strict %v: the failed load (%v) changed %q", strict, err, k)
					}
				}
				nn.Release(m)
				continue
			}
			tensors, _, rerr := tensorfile.Read(path)
			if rerr != nil {
				t.Fatalf("strict %v: Load accepted a file Read refuses: %v", strict, rerr)
			}
			sd := nn.StateDict(m)
			for k, st := range tensors {
				x, ok := sd[k]
				if !ok {
					continue
				}
				want, derr := tensorfile.Decode(st, x.DType())
				if derr != nil {
					t.Fatalf("strict %v: loaded %q, which does not decode: %v", strict, k, derr)
				}
				if !bytes.Equal(after[k], want.RawBytes()) {
					t.Fatalf("strict %v: %q holds % x, the file % x", strict, k, after[k], want.RawBytes())
				}
				want.Release()
			}
			nn.Release(m)
		}
	})
}

// loadFuzzSeeds returns the seed corpus of FuzzLoad: the model's own
// file, files of other dtypes, one without num_batches_tracked, and ones
// that must fail (shared weights that differ, a value out of range).
func loadFuzzSeeds(tb testing.TB) []fuzztest.Seed {
	var seeds []fuzztest.Seed
	add := func(name string, b []byte) {
		seeds = append(seeds, fuzztest.Seed{Name: name, Args: []any{b}})
	}
	m := fuzzModel()
	defer nn.Release(m)
	path := filepath.Join(tb.TempDir(), "m.safetensors")
	if err := nn.Save(m, path); err != nil {
		tb.Fatal(err)
	}
	saved, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	add("saved", saved)
	tensors, _, err := tensorfile.Read(path)
	if err != nil {
		tb.Fatal(err)
	}
	file := func(name string, edit func(map[string]safetensors.Tensor)) {
		ts := map[string]safetensors.Tensor{}
		for k, v := range tensors {
			ts[k] = v
		}
		edit(ts)
		var buf bytes.Buffer
		if err := safetensors.Write(&buf, ts, nil); err != nil {
			tb.Fatal(err)
		}
		add(name, buf.Bytes())
	}
	file("without-num-batches-tracked", func(ts map[string]safetensors.Tensor) { delete(ts, "2.num_batches_tracked") })
	file("one-name-of-a-shared-weight", func(ts map[string]safetensors.Tensor) { delete(ts, "1.weight") })
	file("shared-weights-differ", func(ts map[string]safetensors.Tensor) {
		ts["1.weight"] = safetensors.Tensor{DType: "F32", Shape: []int{3, 2}, Data: make([]byte, 24)}
	})
	file("converted", func(ts map[string]safetensors.Tensor) {
		ts["2.running_var"] = safetensors.Tensor{DType: "F64", Shape: []int{2}, Data: []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40}}
		ts["2.num_batches_tracked"] = safetensors.Tensor{DType: "I32", Shape: []int{}, Data: []byte{7, 0, 0, 0}}
		ts["3.bias"] = safetensors.Tensor{DType: "BF16", Shape: []int{1}, Data: []byte{0x80, 0x3f}}
	})
	file("out-of-range", func(ts map[string]safetensors.Tensor) {
		ts["2.num_batches_tracked"] = safetensors.Tensor{DType: "F32", Shape: []int{}, Data: []byte{0, 0, 0xc0, 0x7f}}
	})
	file("unexpected-key", func(ts map[string]safetensors.Tensor) {
		ts["head.weight"] = safetensors.Tensor{DType: "F32", Shape: []int{1}, Data: make([]byte, 4)}
	})
	return seeds
}

// TestLoadFuzzSeeds checks the committed seed corpus of FuzzLoad (run
// with -update-fuzz-seeds to rewrite it).
func TestLoadFuzzSeeds(t *testing.T) {
	fuzztest.Check(t, "FuzzLoad", loadFuzzSeeds(t), maxLoadFuzzFile)
}
