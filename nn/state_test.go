package nn_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/safetensors"
	"github.com/vramgo/vram/nn"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	src := newMLP(vram.WithGenerator(vram.NewGenerator(1)))
	if err := nn.Save(src, path); err != nil {
		t.Fatal(err)
	}
	// Saving again overwrites atomically and leaves no temporary files.
	if err := nn.Save(src, path); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want just the model", len(entries))
	}

	tests := []struct {
		name string
		dst  func() *mlp
	}{
		{"same dtype", func() *mlp { return newMLP(vram.WithGenerator(vram.NewGenerator(2))) }},
		{"float64 model", func() *mlp { return newMLP(vram.Float64, vram.WithGenerator(vram.NewGenerator(2))) }},
		{"on a simulated GPU", func() *mlp { return newMLP(vram.Sim(0), vram.WithGenerator(vram.NewGenerator(2))) }},
		{"bfloat16 model", func() *mlp { return newMLP(vram.BFloat16, vram.WithGenerator(vram.NewGenerator(2))) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := tt.dst()
			before := dst.Parameters()
			dev, dt := before[0].Device(), before[0].DType()
			if err := nn.Load(dst, path); err != nil {
				t.Fatal(err)
			}
			want := src.NamedParameters()
			for i, p := range dst.NamedParameters() {
				if p.Tensor != before[i] || p.Tensor.Device() != dev || p.Tensor.DType() != dt || !p.Tensor.RequiresGrad() {
					t.Fatalf("%s: identity, device or dtype changed: %v", p.Name, p.Tensor)
				}
				tol := 0.0
				if dt == vram.BFloat16 {
					tol = 1.0 / 128
				}
				checkValues(t, p.Name, p.Tensor.Float64s(), want[i].Tensor.Float64s(), tol)
			}
		})
	}
}

func TestSaveFormat(t *testing.T) {
	// The file uses PyTorch's names and dtypes and can be read back with
	// the safetensors package.
	l := nn.NewSequential(nn.NewLinear(2, 3, vram.Float64))
	set(l.At(0).(*nn.Linear).Bias, 1, 2, 3)
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := nn.Save(l, path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tensors, meta, err := safetensors.Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if meta["format"] != "pt" {
		t.Errorf("metadata %v", meta)
	}
	w, b := tensors["0.weight"], tensors["0.bias"]
	if w.DType != "F64" || !slices.Equal(w.Shape, []int{3, 2}) || b.DType != "F64" || !slices.Equal(b.Shape, []int{3}) {
		t.Fatalf("tensors %v", tensors)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	if err := nn.Save(nn.NewSequential(nn.NewLinear(2, 3)), good); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(good)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stFile := func(name string, tensors map[string]safetensors.Tensor) string {
		var buf bytes.Buffer
		if err := safetensors.Write(&buf, tensors, nil); err != nil {
			t.Fatal(err)
		}
		return write(name, buf.Bytes())
	}
	f32 := func(shape ...int) safetensors.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		return safetensors.Tensor{DType: "F32", Shape: shape, Data: make([]byte, 4*n)}
	}
	tests := []struct {
		name  string
		model nn.Module
		path  string
		want  []string
		kind  error // what the error matches under errors.Is
	}{
		{"missing file", nn.NewLinear(2, 3), filepath.Join(dir, "nope"), []string{"no such file"}, fs.ErrNotExist},
		{"missing key", nn.NewSequential(nn.NewLinear(2, 3), nn.NewLinear(3, 1)), good,
			[]string{`missing keys ["1.weight", "1.bias"]`}, vram.ErrArgument},
		{"unexpected key", nn.NewSequential(nn.NewLinearNoBias(2, 3)), good, []string{`unexpected keys ["0.bias"]`}, vram.ErrArgument},
		{"renamed keys", nn.NewLinear(2, 3), good,
			[]string{`missing keys ["weight", "bias"]`, `unexpected keys ["0.bias", "0.weight"]`}, vram.ErrArgument},
		{"wrong shape", nn.NewSequential(nn.NewLinear(3, 3)), good, []string{`"0.weight" has shape [3, 2] in the file and [3, 3] in the model`}, vram.ErrShape},
		{"truncated", nn.NewSequential(nn.NewLinear(2, 3)), write("trunc", raw[:len(raw)-3]), []string{"safetensors: ", "truncated"}, vram.ErrArgument},
		{"garbage", nn.NewSequential(nn.NewLinear(2, 3)), write("garbage", []byte("this is not a safetensors file")), []string{"safetensors: "}, vram.ErrArgument},
		{"empty file", nn.NewSequential(nn.NewLinear(2, 3)), write("empty", nil), []string{"safetensors: "}, vram.ErrArgument},
		{"unsupported dtype", nn.NewLinearNoBias(1, 1), stFile("f8", map[string]safetensors.Tensor{
			"weight": {DType: "F8_E4M3", Shape: []int{1, 1}, Data: []byte{0}}}), []string{"F8_E4M3 is not supported"}, vram.ErrDType},
		{"scalar vs vector", nn.NewLinearNoBias(1, 1), stFile("scalar", map[string]safetensors.Tensor{"weight": f32()}),
			[]string{"has shape [] in the file"}, vram.ErrShape},
		{"nil module", nil, good, []string{"nil module"}, vram.ErrArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := [][]float64{}
			if tt.model != nil {
				for _, p := range tt.model.Parameters() {
					before = append(before, p.Float64s())
				}
			}
			err := nn.Load(tt.model, tt.path)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if !strings.HasPrefix(err.Error(), "nn: load") {
				t.Errorf("error %q lacks the nn: load prefix", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("error %q does not match %v", err, tt.kind)
			}
			if tt.model == nil {
				return
			}
			for i, p := range tt.model.Parameters() {
				if !slices.Equal(p.Float64s(), before[i]) {
					t.Fatal("a failed Load changed a parameter")
				}
			}
		})
	}
}

func TestLoadConvertsDTypes(t *testing.T) {
	// A file written by another tool in half precision loads into a float32
	// model, and a scalar parameter loads from a scalar tensor.
	var m nn.Base
	w := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	s := vram.Zeros(vram.Shape{}, vram.Float64, vram.WithGrad())
	m.RegisterParameter("w", w)
	m.RegisterParameter("s", s)
	var buf bytes.Buffer
	err := safetensors.Write(&buf, map[string]safetensors.Tensor{
		"w": {DType: "F16", Shape: []int{2}, Data: []byte{0x00, 0x3c, 0x00, 0xc0}}, // 1, -2
		"s": {DType: "I32", Shape: []int{}, Data: []byte{7, 0, 0, 0}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "half.safetensors")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := nn.Load(baseModule{&m}, path); err != nil {
		t.Fatal(err)
	}
	checkValues(t, "w", w.Float64s(), []float64{1, -2}, 0)
	checkValues(t, "s", s.Float64s(), []float64{7}, 0)
}

// baseModule turns a bare Base into a Module for tests.
type baseModule struct{ *nn.Base }

func (baseModule) Forward(x *vram.Tensor) *vram.Tensor { return x }

// fillDevice allocates d in 1 MiB blocks until it is full, then frees one
// block, and returns the blocks held.
func fillDevice(d vram.Device) []*vram.Tensor {
	vram.EmptyCache(d)
	var held []*vram.Tensor
	for {
		var b *vram.Tensor
		if vram.Catch(func() { b = vram.Empty(vram.Shape{1 << 18}, d) }) != nil {
			break
		}
		held = append(held, b)
	}
	held[len(held)-1].Release()
	return held[:len(held)-1]
}

// TestLoadSaveFailures checks that Load and Save report bad modules and
// device failures as errors, never as panics, and that Load writes a
// contiguous tensor on a device without a temporary there.
func TestLoadSaveFailures(t *testing.T) {
	dir := t.TempDir()
	dev := vram.Sim(1)
	linear := filepath.Join(dir, "linear.safetensors")
	if err := nn.Save(nn.NewLinear(1024, 1024), linear); err != nil {
		t.Fatal(err)
	}
	conv := filepath.Join(dir, "conv.safetensors")
	if err := nn.Save(nn.NewConv2d(256, 256, 4, nn.ConvOptions{}), conv); err != nil {
		t.Fatal(err)
	}
	released := func() nn.Module {
		l := nn.NewLinear(1024, 1024)
		nn.Release(l)
		return l
	}
	tests := []struct {
		name  string
		model func() nn.Module
		path  string
		save  bool
		full  bool   // the device has less free memory than one weight
		want  string // "" for success
	}{
		{"load into nil", func() nn.Module { return nil }, linear, false, false, "nil module"},
		{"save nil", func() nn.Module { return nil }, filepath.Join(dir, "nil"), true, false, "nil module"},
		{"load into released", released, linear, false, false, `"weight" was released`},
		{"save released", released, filepath.Join(dir, "released"), true, false, "already released"},
		{"contiguous on a full device", func() nn.Module { return nn.NewLinear(1024, 1024, dev) }, linear, false, true, ""},
		{"channels-last on a full device", func() nn.Module {
			c := nn.NewConv2d(256, 256, 4, nn.ConvOptions{}, dev)
			nn.ToMemoryFormat(c, vram.ChannelsLast)
			return c
		}, conv, false, true, ""},
		{"save channels-last on a full device", func() nn.Module {
			c := nn.NewConv2d(256, 256, 4, nn.ConvOptions{}, dev)
			nn.ToMemoryFormat(c, vram.ChannelsLast)
			return c
		}, filepath.Join(dir, "saved.safetensors"), true, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.model()
			if m != nil {
				defer nn.Release(m)
			}
			if tt.full {
				held := fillDevice(dev)
				defer func() {
					for _, b := range held {
						b.Release()
					}
					vram.EmptyCache(dev)
				}()
			}
			var err error
			if p := vram.Catch(func() {
				if tt.save {
					err = nn.Save(m, tt.path)
				} else {
					err = nn.Load(m, tt.path)
				}
			}); p != nil {
				t.Fatalf("panicked: %v", p)
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("failed: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			case tt.want == "":
				want := filepath.Join(dir, "want.safetensors")
				if err := nn.Save(m, want); err != nil {
					t.Fatal(err)
				}
				a, _ := os.ReadFile(tt.path)
				b, _ := os.ReadFile(want)
				if !bytes.Equal(a, b) {
					t.Error("the loaded model does not save as the file it was loaded from")
				}
			}
		})
	}
}

// TestLoadNonStrict checks PyTorch's strict=False: a backbone saved from
// one model loads into a model with another head, the keys either side
// lacks are reported, and a shape mismatch still changes nothing.
func TestLoadNonStrict(t *testing.T) {
	dir := t.TempDir()
	g := vram.NewGenerator(1)
	pretrained := nn.NewSequential(nn.NewLinear(4, 8, vram.WithGenerator(g)), nn.NewReLU(), nn.NewLinear(8, 3, vram.WithGenerator(g)))
	defer nn.Release(pretrained)
	path := filepath.Join(dir, "backbone.safetensors")
	if err := nn.Save(pretrained, path); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                string
		model               nn.Module
		missing, unexpected []string
		err                 string
		loaded              bool // the first layer now holds the pretrained weights
	}{
		{"same model", nn.NewSequential(nn.NewLinear(4, 8), nn.NewReLU(), nn.NewLinear(8, 3)), nil, nil, "", true},
		{"no head", nn.NewSequential(nn.NewLinear(4, 8)), nil, []string{"2.bias", "2.weight"}, "", true},
		{"extra layer", nn.NewSequential(nn.NewLinear(4, 8), nn.NewReLU(), nn.NewLinear(8, 3), nn.NewLinear(3, 2)),
			[]string{"3.weight", "3.bias"}, nil, "", true},
		{"another head", nn.NewSequential(nn.NewLinear(4, 8), nn.NewReLU(), nn.NewLinear(8, 10)),
			nil, nil, `"2.weight" has shape [3, 8] in the file and [10, 8] in the model`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer nn.Release(tc.model)
			first := tc.model.Parameters()[0]
			before := first.Float64s()
			res, err := nn.LoadNonStrict(tc.model, path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one about %s", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Missing, tc.missing) || !slices.Equal(res.Unexpected, tc.unexpected) {
				t.Errorf("missing %q, unexpected %q; want %q, %q", res.Missing, res.Unexpected, tc.missing, tc.unexpected)
			}
			want := before
			if tc.loaded {
				want = pretrained.Parameters()[0].Float64s()
			}
			if !slices.Equal(first.Float64s(), want) {
				t.Errorf("first layer loaded: %v, want %v", !tc.loaded, tc.loaded)
			}
		})
	}
}
