package torchload

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// recordedEntry is one tensor of a .json file of testdata/recorded: what
// torch.load read from the .pt file beside it (testdata/record.py).
type recordedEntry struct {
	Key    string    `json:"key"`
	DType  string    `json:"dtype"`
	Shape  []int     `json:"shape"`
	Values []float64 `json:"values"`
}

// TestRecordedByPyTorch reads every checkpoint that PyTorch itself wrote
// into testdata/recorded (record.py, zip and legacy formats) and checks
// each tensor's key, dtype, shape and values against what torch.load read
// from the same file. DistributedDataParallel's "module." prefix is
// stripped, and int16 and uint8 widen to int32, as the package documents.
func TestRecordedByPyTorch(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "recorded", "*.pt"))
	if len(files) == 0 {
		t.Fatal("no recorded checkpoints in testdata/recorded")
	}
	widened := map[string]string{"int16": "int32", "uint8": "int32"}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(strings.TrimSuffix(path, ".pt") + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var want []recordedEntry
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			sd, err := ReadStateDictFile(path, Options{})
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			defer sd.Release()
			if len(sd) != len(want) {
				t.Fatalf("%d tensors, torch.load read %d: %v", len(sd), len(want), sd.Keys())
			}
			for i, w := range want {
				e := sd[i]
				key := strings.TrimPrefix(w.Key, "module.")
				dt := w.DType
				if n, ok := widened[dt]; ok {
					dt = n
				}
				if e.Key != key || e.Tensor.DType().String() != dt {
					t.Errorf("tensor %d: %s %s, want %s %s", i, e.Key, e.Tensor.DType(), key, dt)
					continue
				}
				if got := e.Tensor.Shape(); len(got) != len(w.Shape) {
					t.Errorf("%s: shape %v, want %v", key, got, w.Shape)
					continue
				} else {
					for j := range got {
						if got[j] != w.Shape[j] {
							t.Errorf("%s: shape %v, want %v", key, got, w.Shape)
						}
					}
				}
				var got []float64
				vram.Tidy(func() { got = e.Tensor.Cast(vram.Float64).Float64s() })
				if len(got) != len(w.Values) {
					t.Errorf("%s: %d values, want %d", key, len(got), len(w.Values))
					continue
				}
				for j := range got {
					if got[j] != w.Values[j] && !(math.IsNaN(got[j]) && math.IsNaN(w.Values[j])) {
						t.Errorf("%s: values %v, want %v", key, got, w.Values)
						break
					}
				}
			}
		})
	}
}

// TestLoadRecordedByPyTorch loads the checkpoints of a Linear(3, 2) and a
// BatchNorm1d(2) in a Sequential that PyTorch wrote (a state dict, and a
// training checkpoint of a DistributedDataParallel model, each in the zip
// and the legacy format) into the same model, strictly, and checks every
// value against what torch.load read.
func TestLoadRecordedByPyTorch(t *testing.T) {
	for _, name := range []string{"sequential", "sequential_legacy", "ddp_nested", "ddp_nested_legacy"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", "recorded", name+".pt")
			raw, err := os.ReadFile(filepath.Join("testdata", "recorded", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var want []recordedEntry
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			m := nn.NewSequential(nn.NewLinear(3, 2), nn.NewBatchNorm1d(2))
			defer nn.Release(m)
			if _, err := LoadPyTorch(m, path, true); err != nil {
				t.Fatal(err)
			}
			sd := nn.StateDict(m)
			for _, w := range want {
				key := strings.TrimPrefix(w.Key, "module.")
				x, ok := sd[key]
				if !ok {
					t.Errorf("the model has no %s", key)
					continue
				}
				var got []float64
				vram.Tidy(func() { got = x.Cast(vram.Float64).Float64s() })
				if !slices.Equal(got, w.Values) {
					t.Errorf("%s = %v, torch.load read %v", key, got, w.Values)
				}
			}
		})
	}
}
