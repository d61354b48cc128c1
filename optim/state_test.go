package optim_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/safetensors"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// TestCheckpointResumes checks that a run saved after some steps (model
// with nn.Save, optimizer with optim.Save) and loaded into a fresh model
// and optimizer goes on exactly as the run that did not stop.
func TestCheckpointResumes(t *testing.T) {
	makers := []struct {
		name string
		make func([]*vram.Tensor) (optim.Optimizer, error)
	}{
		{"SGD nesterov", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-3})
		}},
		{"Adam", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdam(ps, optim.AdamConfig{LR: 0.01})
		}},
		{"AdamW", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamW(ps, optim.AdamConfig{LR: 0.01})
		}},
		{"AdamW amsgrad in a group", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamWGroups([]optim.ParamGroup{optim.Group(ps[:2], optim.WithAMSGrad(true)), optim.Group(ps[2:])}, optim.AdamConfig{LR: 0.01})
		}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, mk := range makers {
			t.Run(dev.String()+"/"+mk.name, func(t *testing.T) {
				dir := t.TempDir()
				x := vram.Randn(vram.Shape{16, 4}, dev, vram.WithGenerator(vram.NewGenerator(1)))
				defer x.Release()
				y := vram.Randn(vram.Shape{16, 2}, dev, vram.WithGenerator(vram.NewGenerator(2)))
				defer y.Release()
				newRun := func() (nn.Module, optim.Optimizer) {
					m := nn.NewSequential(nn.NewLinear(4, 8, dev, vram.WithGenerator(vram.NewGenerator(3))), nn.NewReLU(),
						nn.NewLinear(8, 2, dev, vram.WithGenerator(vram.NewGenerator(4))))
					o, err := mk.make(m.Parameters())
					if err != nil {
						t.Fatal(err)
					}
					return m, o
				}
				train := func(m nn.Module, o optim.Optimizer, steps int) {
					for range steps {
						vram.Tidy(func() {
							nn.MSELoss(m.Forward(x), y).Backward()
							o.Step()
							o.ZeroGrad()
						})
					}
				}
				release := func(m nn.Module, o optim.Optimizer) {
					nn.Release(m)
					o.(interface{ Release() }).Release()
				}
				m1, o1 := newRun()
				defer release(m1, o1)
				train(m1, o1, 3)
				o1.SetLR(o1.LR() / 2) // a schedule's change is restored too
				if err := nn.Save(m1, filepath.Join(dir, "model.safetensors")); err != nil {
					t.Fatal(err)
				}
				if err := optim.Save(o1, filepath.Join(dir, "opt.safetensors")); err != nil {
					t.Fatal(err)
				}
				train(m1, o1, 4)

				m2, o2 := newRun()
				defer release(m2, o2)
				train(m2, o2, 1) // state that Load must replace
				if err := nn.Load(m2, filepath.Join(dir, "model.safetensors")); err != nil {
					t.Fatal(err)
				}
				if err := optim.Load(o2, filepath.Join(dir, "opt.safetensors")); err != nil {
					t.Fatal(err)
				}
				if o2.LR() != o1.LR() {
					t.Errorf("learning rate %v, want %v", o2.LR(), o1.LR())
				}
				train(m2, o2, 4)
				p1, p2 := m1.Parameters(), m2.Parameters()
				for i := range p1 {
					a, b := p1[i].Float64s(), p2[i].Float64s()
					for j := range a {
						if a[j] != b[j] {
							t.Fatalf("parameter %d element %d: %v after resuming, %v without stopping", i, j, b[j], a[j])
						}
					}
				}
			})
		}
	}
}

// TestCheckpointRefusals checks that a checkpoint that does not fit the
// optimizer is refused with an error that says why, changing nothing.
func TestCheckpointRefusals(t *testing.T) {
	dir := t.TempDir()
	w := vram.Zeros(vram.Shape{3}, vram.WithGrad())
	defer w.Release()
	b := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	defer b.Release()
	step := func(o optim.Optimizer, ps ...*vram.Tensor) {
		vram.Tidy(func() {
			for _, p := range ps {
				p.SetGrad(vram.OnesLike(p))
			}
			o.Step()
			o.ZeroGrad()
		})
	}
	adam, err := optim.NewAdam([]*vram.Tensor{w, b}, optim.AdamConfig{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer adam.Release()
	step(adam, w) // state for w only
	good := filepath.Join(dir, "adam.safetensors")
	if err := optim.Save(adam, good); err != nil {
		t.Fatal(err)
	}
	tensors, meta := readCheckpoint(t, good)
	if len(tensors) != 3 || meta["optimizer"] != "Adam" || meta["params"] != "2" {
		t.Fatalf("checkpoint holds %d tensors, metadata %v", len(tensors), meta)
	}
	edit := func(name string, change func(map[string]safetensors.Tensor, map[string]string)) string {
		ts, md := readCheckpoint(t, good)
		change(ts, md)
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := safetensors.Write(f, ts, md); err != nil {
			t.Fatal(err)
		}
		return path
	}
	sgd, err := optim.NewSGD([]*vram.Tensor{w, b}, optim.SGDConfig{LR: 0.1, Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	defer sgd.Release()
	one, err := optim.NewAdam([]*vram.Tensor{w}, optim.AdamConfig{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Release()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opt  optim.Optimizer
		path string
		want string
	}{
		{"truncated file", adam, write("trunc.st", raw[:len(raw)-2]), "safetensors: "},
		{"truncated header", adam, write("trunchdr.st", raw[:20]), "truncated"},
		{"not safetensors", adam, write("junk.st", []byte("not a checkpoint at all")), "safetensors: "},
		{"empty file", adam, write("empty.st", nil), "truncated"},
		{"another optimizer", sgd, good, `"Adam", not of SGD`},
		{"another parameter list", one, good, "for 2 parameters, the optimizer has 1"},
		{"missing file", adam, filepath.Join(dir, "none"), "no such file"},
		{"bad rate", adam, edit("lr.st", func(_ map[string]safetensors.Tensor, m map[string]string) {
			m["param_groups"] = strings.Replace(m["param_groups"], `"lr":0.1`, `"lr":-0.1`, 1)
		}), "invalid learning rate -0.1"},
		{"bad rate, file without groups", adam, edit("lr0.st", func(_ map[string]safetensors.Tensor, m map[string]string) {
			delete(m, "param_groups")
			m["lr"] = "NaN"
		}), "learning rate"},
		{"missing step", adam, edit("nostep.st", func(ts map[string]safetensors.Tensor, _ map[string]string) { delete(ts, "state.0.step") }),
			`missing key "state.0.step"`},
		{"unexpected key", adam, edit("extra.st", func(ts map[string]safetensors.Tensor, _ map[string]string) {
			ts["state.7.exp_avg"] = ts["state.0.exp_avg"]
		}), `unexpected key "state.7.exp_avg"`},
		{"wrong shape", adam, edit("shape.st", func(ts map[string]safetensors.Tensor, _ map[string]string) {
			ts["state.1.exp_avg"], ts["state.1.exp_avg_sq"], ts["state.1.step"] = ts["state.0.exp_avg"], ts["state.0.exp_avg_sq"], ts["state.0.step"]
		}), `"state.1.exp_avg" has shape [3], want [2]`},
		{"amsgrad without its maximum", adam, edit("ams.st", func(_ map[string]safetensors.Tensor, m map[string]string) {
			m["param_groups"] = strings.Replace(m["param_groups"], `"amsgrad":false`, `"amsgrad":true`, 1)
		}), `missing key "state.0.max_exp_avg_sq"`},
		{"thousands of unexpected keys", adam, edit("many.st", func(ts map[string]safetensors.Tensor, _ map[string]string) {
			for i := range 3000 {
				ts[fmt.Sprintf("extra.%04d", i)] = safetensors.Tensor{DType: "U8", Shape: []int{0}}
			}
		}), `unexpected key "extra.0019"; and 2980 more problems`},
		{"null rate", adam, edit("nulllr.st", func(_ map[string]safetensors.Tensor, m map[string]string) {
			m["param_groups"] = strings.Replace(m["param_groups"], `"lr":0.1`, `"lr":null`, 1)
		}), "group 0: lr is null"},
		{"null betas", adam, edit("nullbetas.st", func(_ map[string]safetensors.Tensor, m map[string]string) {
			m["param_groups"] = strings.Replace(m["param_groups"], `"betas":[0.9,0.999]`, `"betas":null`, 1)
		}), "group 0: betas is null"},
		{"null flag", adam, edit("nullams.st", func(_ map[string]safetensors.Tensor, m map[string]string) {
			m["param_groups"] = strings.Replace(m["param_groups"], `"amsgrad":false`, `"amsgrad":null`, 1)
		}), "group 0: amsgrad is null"},
		{"null initial rate", adam, edit("nullinit.st", func(_ map[string]safetensors.Tensor, m map[string]string) {
			m["param_groups"] = strings.Replace(m["param_groups"], `"lr":0.1`, `"initial_lr":null,"lr":0.1`, 1)
		}), "group 0: initial_lr is null"},
		{"null momentum", sgd, edit("nullmom.st", func(_ map[string]safetensors.Tensor, m map[string]string) {
			m["optimizer"] = "SGD"
			m["param_groups"] = `[{"dampening":0,"lr":0.1,"maximize":false,"momentum":null,"nesterov":false,"params":[0,1],"weight_decay":0}]`
		}), "group 0: momentum is null"},
		{"a long unexpected key", adam, edit("long.st", func(ts map[string]safetensors.Tensor, _ map[string]string) {
			ts[strings.Repeat("k", 1<<20)] = ts["state.0.exp_avg"]
		}), `unexpected key "kkkk`},
		{"parameter number with a sign", adam, edit("sign.st", func(ts map[string]safetensors.Tensor, _ map[string]string) {
			ts["state.+0.exp_avg"] = ts["state.0.exp_avg"]
		}), `unexpected key "state.+0.exp_avg"`},
		{"hyper-parameter given twice", adam, edit("twice.st", func(_ map[string]safetensors.Tensor, m map[string]string) {
			m["param_groups"] = strings.Replace(m["param_groups"], `"lr":0.1`, `"lr":0.1,"lr":5`, 1)
		}), `group 0: "lr" given twice`},
		{"fractional step", adam, edit("step.st", func(ts map[string]safetensors.Tensor, _ map[string]string) {
			ts["state.0.step"] = safetensors.Tensor{DType: "F64", Shape: nil, Data: []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x3f}} // 1.5
		}), "not a whole number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lr := tc.opt.LR()
			before := vram.MemoryAllocated(vram.CPU)
			err := optim.Load(tc.opt, tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || len(err.Error()) > 2000 {
				t.Fatalf("error %v, want one about %q", err, tc.want)
			}
			if tc.name != "missing file" && !errors.Is(err, vram.ErrArgument) {
				t.Errorf("error %v does not match vram.ErrArgument", err)
			}
			if tc.opt.LR() != lr || vram.MemoryAllocated(vram.CPU) != before {
				t.Errorf("the failed load changed the rate (%v to %v) or left memory (%d to %d bytes)",
					lr, tc.opt.LR(), before, vram.MemoryAllocated(vram.CPU))
			}
		})
	}
}

func readCheckpoint(t *testing.T, path string) (map[string]safetensors.Tensor, map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts, md, err := safetensors.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return ts, md
}
