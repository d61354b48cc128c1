package nn_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/safetensors"
	"github.com/vramgo/vram/nn"
)

// bnFile writes a batch-norm state dict of two channels under prefix,
// without the keys in leave.
func bnFile(t *testing.T, prefix string, leave ...string) string {
	t.Helper()
	f32 := func(vals ...float32) safetensors.Tensor {
		var b []byte
		for _, v := range vals {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return safetensors.Tensor{DType: "F32", Shape: []int{len(vals)}, Data: b}
	}
	all := map[string]safetensors.Tensor{
		"weight":              f32(2, 3),
		"bias":                f32(4, 5),
		"running_mean":        f32(6, 7),
		"running_var":         f32(8, 9),
		"num_batches_tracked": {DType: "I64", Shape: []int{}, Data: binary.LittleEndian.AppendUint64(nil, 11)},
	}
	tensors := map[string]safetensors.Tensor{}
	for k, v := range all {
		if !slices.Contains(leave, k) {
			tensors[prefix+k] = v
		}
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bn.safetensors")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func bn2d() (nn.Module, *nn.BatchNorm2d) { l := nn.NewBatchNorm2d(2); return l, l }

// TestLoadWithoutNumBatchesTracked loads batch-norm files that lack
// num_batches_tracked, as files from before PyTorch 0.4.1 do: PyTorch
// loads them strictly and keeps the counter, and so must Load.
func TestLoadWithoutNumBatchesTracked(t *testing.T) {
	tests := []struct {
		name   string
		bn     func() (nn.Module, *nn.BatchNorm2d)
		prefix string // of the keys in the file and of the module in the model
		leave  []string
		strict bool
		want   error // nil, or the kind of Load's error
	}{
		{"2d strict", bn2d, "", []string{"num_batches_tracked"}, true, nil},
		{"1d strict", func() (nn.Module, *nn.BatchNorm2d) { l := nn.NewBatchNorm1d(2); return l, &l.BatchNorm2d }, "", []string{"num_batches_tracked"}, true, nil},
		{"nested strict", bn2d, "0.", []string{"num_batches_tracked"}, true, nil},
		{"non-strict", bn2d, "0.", []string{"num_batches_tracked"}, false, nil},
		{"running mean still needed", bn2d, "", []string{"num_batches_tracked", "running_mean"}, true, vram.ErrArgument},
		{"no running stats", func() (nn.Module, *nn.BatchNorm2d) {
			l := nn.NewBatchNorm2dOptions(2, nn.BatchNormOptions{NoRunningStats: true})
			return l, l
		}, "", []string{"num_batches_tracked", "running_mean", "running_var"}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, bn := tt.bn()
			if tt.prefix != "" {
				m = nn.NewSequential(m)
			}
			if bn.NumBatchesTracked != nil {
				bn.NumBatchesTracked.SetRawBytes(binary.LittleEndian.AppendUint64(nil, 7))
			}
			path := bnFile(t, tt.prefix, tt.leave...)
			var err error
			if tt.strict {
				err = nn.Load(m, path)
			} else {
				var res nn.LoadResult
				res, err = nn.LoadNonStrict(m, path)
				if len(res.Missing) != 0 || len(res.Unexpected) != 0 {
					t.Errorf("missing %q, unexpected %q; want none", res.Missing, res.Unexpected)
				}
			}
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("Load = %v, want an error matching %v", err, tt.want)
				}
				if got := bn.Weight.Float64s(); !slices.Equal(got, []float64{1, 1}) {
					t.Errorf("a failed Load changed the weight to %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := bn.Weight.Float64s(); !slices.Equal(got, []float64{2, 3}) {
				t.Errorf("weight %v, want [2 3]", got)
			}
			if bn.NumBatchesTracked != nil {
				if got := bn.NumBatchesTracked.Int64s(); got[0] != 7 {
					t.Errorf("num_batches_tracked %v, want the 7 it had", got)
				}
			}
		})
	}
}
