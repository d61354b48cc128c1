package torchload

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/models"
)

// storageClass is the torch storage class of a vram dtype.
var storageClass = map[vram.DType]string{
	vram.Float32: "FloatStorage", vram.Float64: "DoubleStorage", vram.Float16: "HalfStorage",
	vram.BFloat16: "BFloat16Storage", vram.Int64: "LongStorage", vram.Int32: "IntStorage",
	vram.Int8: "CharStorage", vram.Bool: "BoolStorage",
}

// saveTorch writes m's state dict as torch.save would, with keys prefixed
// by prefix, wrapped by wrap (nil: the state dict itself), and returns
// the file's path.
func saveTorch(t testing.TB, m nn.Module, prefix string, wrap func(odict) any) string {
	t.Helper()
	sd := nn.StateDict(m)
	store := map[string][]byte{}
	var root odict
	for i, k := range slices.Sorted(mapsKeys(sd)) {
		x := sd[k]
		key := fmt.Sprint(i)
		store[key] = x.RawBytes()
		size := make([]int64, len(x.Shape()))
		for j, s := range x.Shape() {
			size[j] = int64(s)
		}
		root = append(root, kv{prefix + k, tens{key: key, class: storageClass[x.DType()], numel: int64(x.NumElements()),
			size: size, stride: contiguous(size), param: x.DType().IsFloat()}})
	}
	var v any = root
	if wrap != nil {
		v = wrap(root)
	}
	path := filepath.Join(t.TempDir(), "model.pth")
	if err := os.WriteFile(path, archiveOf(t, v, store), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mapsKeys(m map[string]*vram.Tensor) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestLoadResNet loads a checkpoint of a ResNet with torchvision's
// bottleneck blocks (one per stage, to stay quick), saved from a DDP model
// inside a training checkpoint: every parameter and buffer arrives.
func TestLoadResNet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a ResNet")
	}
	m := models.NewResNet(models.BottleneckKind, [4]int{1, 1, 1, 1}, models.Config{NumClasses: 10})
	defer nn.Release(m)
	path := saveTorch(t, m, "module.", func(sd odict) any {
		return pdict{{"epoch", 90}, {"arch", "resnet18"}, {"state_dict", sd}, {"best_acc1", 69.7}}
	})
	want := map[string][]byte{}
	for k, x := range nn.StateDict(m) {
		want[k] = x.RawBytes()
		vram.NoGrad(func() { x.FillInPlace(0) })
	}
	res, err := LoadPyTorch(m, path, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Missing)+len(res.Unexpected) != 0 {
		t.Fatalf("result %+v", res)
	}
	for k, x := range nn.StateDict(m) {
		if !bytes.Equal(x.RawBytes(), want[k]) {
			t.Errorf("%s differs", k)
		}
	}
}

func TestLoadPyTorch(t *testing.T) {
	newModel := func() nn.Module { return nn.NewSequential(nn.NewLinear(3, 2), nn.NewBatchNorm1d(2)) }
	src := newModel()
	other := nn.NewSequential(nn.NewLinear(3, 2))
	tests := []struct {
		name       string
		path       string
		strict     bool
		kind       error
		msg        string // in the error
		missing    []string
		unexpected []string
		from       nn.Module // the model saved; src when nil
	}{
		{name: "strict", path: saveTorch(t, src, "", nil), strict: true},
		{name: "ddp", path: saveTorch(t, src, "module.", func(sd odict) any { return pdict{{"model", sd}, {"epoch", 1}} }), strict: true},
		{name: "lightning prefix", path: saveTorch(t, src, "model.", func(sd odict) any { return pdict{{"state_dict", sd}, {"epoch", 1}} }),
			strict: true, kind: vram.ErrArgument, msg: `every key of the file starts with "model.", which the model's keys lack: Options.StripPrefix "model."`,
			missing:    []string{"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var"},
			unexpected: []string{"model.0.bias", "model.0.weight", "model.1.bias", "model.1.num_batches_tracked", "model.1.running_mean", "model.1.running_var", "model.1.weight"}},
		{name: "strict missing", path: saveTorch(t, other, "", nil), strict: true, kind: vram.ErrArgument,
			missing: []string{"1.weight", "1.bias", "1.running_mean", "1.running_var"}},
		{name: "non-strict", path: saveTorch(t, other, "", nil), from: other,
			missing: []string{"1.weight", "1.bias", "1.running_mean", "1.running_var"}},
		{name: "bad file", path: func() string {
			p := filepath.Join(t.TempDir(), "x.pt")
			os.WriteFile(p, []byte("junk"), 0o644)
			return p
		}(), kind: vram.ErrArgument},
		{name: "missing file", path: filepath.Join(t.TempDir(), "none.pt"), kind: os.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newModel()
			res, err := LoadPyTorch(m, tt.path, tt.strict)
			if tt.kind != nil {
				if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("error %v, want %v with %q", err, tt.kind, tt.msg)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Missing, tt.missing) || !slices.Equal(res.Unexpected, tt.unexpected) {
				t.Errorf("result %+v", res)
			}
			if tt.kind == nil {
				from := tt.from
				if from == nil {
					from = src
				}
				w := nn.StateDict(from)["0.weight"].Float64s()
				if got := nn.StateDict(m)["0.weight"].Float64s(); !slices.Equal(got, w) {
					t.Errorf("0.weight = %v, want %v", got, w)
				}
			}
		})
	}
}
