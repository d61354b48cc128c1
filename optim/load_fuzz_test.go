package optim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/fuzztest"
	"github.com/vramgo/vram/internal/safetensors"
	"github.com/vramgo/vram/internal/tensorfile"
)

// maxLoadFuzzFile bounds the files FuzzLoad loads: room for the state of
// fuzzOptimizer and some more.
const maxLoadFuzzFile = 4 << 10

// fuzzOptimizer returns the optimizer FuzzLoad loads files into: an Adam
// of two groups, the second with amsgrad, over a float32 and a float16
// parameter, stepped once when stepped is true.
func fuzzOptimizer(tb testing.TB, stepped bool) *Adam {
	w := vram.FromSlice([]float32{1, -2, 3, -4}, vram.Shape{2, 2}).SetRequiresGrad(true)
	b := vram.FromSlice([]float32{0.5, -0.5}, vram.Shape{2}, vram.Float16).SetRequiresGrad(true)
	a, err := NewAdamGroups([]ParamGroup{Group([]*vram.Tensor{w}), Group([]*vram.Tensor{b}, WithLR(0.01), WithAMSGrad(true))},
		AdamConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
	if err != nil {
		tb.Fatal(err)
	}
	if stepped {
		vram.Tidy(func() {
			w.Square().Sum().Add(b.Cast(vram.Float32).Square().Sum()).Backward()
		})
		a.Step()
	}
	return a
}

// adamSnapshot describes a's hyper-parameters and the bytes of its state,
// to compare before and after a load.
func adamSnapshot(a *Adam) string {
	var b strings.Builder
	for k := range a.NumGroups() {
		h, _ := json.Marshal(a.hypers(k))
		fmt.Fprintf(&b, "group %d: %s\n", k, h)
	}
	vram.Tidy(func() {
		for i := range a.parameters() {
			st := a.stateOf(i)
			for _, name := range slices.Sorted(func(yield func(string) bool) {
				for k := range st {
					if !yield(k) {
						return
					}
				}
			}) {
				fmt.Fprintf(&b, "state %d %s: % x\n", i, name, st[name].RawBytes())
			}
		}
	})
	return b.String()
}

// FuzzLoad checks Load of any file into an Adam of two groups, stepped or
// not: it returns an error or loads, never panics, and a failed load
// changes neither the state nor the hyper-parameters.
func FuzzLoad(f *testing.F) {
	path := filepath.Join(f.TempDir(), "in.safetensors")
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > maxLoadFuzzFile {
			return
		}
		if err := os.WriteFile(path, in, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, stepped := range []bool{false, true} {
			a := fuzzOptimizer(t, stepped)
			before := adamSnapshot(a)
			var err error
			if p := vram.Catch(func() { err = Load(a, path) }); p != nil {
				t.Fatalf("stepped %v: panicked: %v", stepped, p)
			}
			if err != nil {
				if after := adamSnapshot(a); after != before {
					t.Fatalf("stepped %v: the failed load (%v) changed the optimizer from\n%s\nto\n%s", stepped, err, before, after)
				}
			}
			for _, p := range a.parameters() {
				p.Release()
			}
			a.Release()
		}
	})
}

// loadFuzzSeeds returns the seed corpus of FuzzLoad: the state of the
// optimizer stepped once, of one never stepped, of one without
// param_groups (written before groups), and states that must fail.
func loadFuzzSeeds(tb testing.TB) []fuzztest.Seed {
	var seeds []fuzztest.Seed
	dir := tb.TempDir()
	a := fuzzOptimizer(tb, true)
	path := filepath.Join(dir, "stepped.safetensors")
	if err := Save(a, path); err != nil {
		tb.Fatal(err)
	}
	tensors, meta, err := tensorfile.Read(path)
	if err != nil {
		tb.Fatal(err)
	}
	file := func(name string, edit func(ts map[string]safetensors.Tensor, meta map[string]string)) {
		ts, m := map[string]safetensors.Tensor{}, map[string]string{}
		for k, v := range tensors {
			ts[k] = v
		}
		for k, v := range meta {
			m[k] = v
		}
		edit(ts, m)
		var buf bytes.Buffer
		if err := safetensors.Write(&buf, ts, m); err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, fuzztest.Seed{Name: name, Args: []any{buf.Bytes()}})
	}
	file("stepped", func(map[string]safetensors.Tensor, map[string]string) {})
	file("never-stepped", func(ts map[string]safetensors.Tensor, _ map[string]string) {
		for k := range ts {
			delete(ts, k)
		}
	})
	file("without-param-groups", func(_ map[string]safetensors.Tensor, m map[string]string) { delete(m, "param_groups") })
	file("missing-amsgrad-state", func(ts map[string]safetensors.Tensor, _ map[string]string) { delete(ts, "state.1.max_exp_avg_sq") })
	file("bad-step", func(ts map[string]safetensors.Tensor, _ map[string]string) {
		ts["state.0.step"] = safetensors.Tensor{DType: "F32", Shape: []int{}, Data: []byte{0, 0, 0xc0, 0x7f}}
	})
	file("converted", func(ts map[string]safetensors.Tensor, _ map[string]string) {
		ts["state.0.step"] = safetensors.Tensor{DType: "I64", Shape: []int{}, Data: []byte{3, 0, 0, 0, 0, 0, 0, 0}}
		ts["state.1.exp_avg"] = safetensors.Tensor{DType: "F32", Shape: []int{2}, Data: []byte{0, 0, 0x80, 0x3f, 0, 0, 0x80, 0xbf}}
	})
	file("another-optimizer", func(_ map[string]safetensors.Tensor, m map[string]string) { m["optimizer"] = "SGD" })
	a.Release()
	return seeds
}

// TestLoadFuzzSeeds checks the committed seed corpus of FuzzLoad (run
// with -update-fuzz-seeds to rewrite it).
func TestLoadFuzzSeeds(t *testing.T) {
	fuzztest.Check(t, "FuzzLoad", loadFuzzSeeds(t), maxLoadFuzzFile)
}
