package optim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/safetensors"
	"github.com/vramgo/vram/internal/tensorfile"
)

// Checkpoints: Save and Load store an optimizer's state, so that training
// stopped after some steps resumes as if it had not stopped (with nn.Save
// and nn.Load for the model). The file is a safetensors file whose keys
// flatten PyTorch's optimizer state_dict: "state.<i>.momentum_buffer" for
// SGD, "state.<i>.exp_avg", "state.<i>.exp_avg_sq" and "state.<i>.step"
// (a 0-dimensional float32, as PyTorch keeps it) for Adam and AdamW, where
// <i> is the parameter's position in the list the optimizer was made with,
// and only parameters that have state (that were stepped) appear. Its
// metadata names the optimizer, the number of parameters and the learning
// rate ("lr"), which Load restores; the other hyper-parameters are the
// optimizer's own.

// stateful is an optimizer whose state Save and Load store.
type stateful interface {
	Optimizer
	kind() string
	parameters() []*vram.Tensor
	// stateOf returns the state tensors of parameter i by name, nil when
	// it has none: the optimizer's own, or new ones that a vram.Tidy
	// around the call releases.
	stateOf(i int) map[string]*vram.Tensor
	// stateNames returns the names of a parameter's state.
	stateNames() []string
	// setState gives parameter i the state st (tensors of the names of
	// stateNames, the parameter's shape, dtype, device and format, or nil
	// for none), which the optimizer takes over, releasing what it had.
	setState(i int, st map[string]*vram.Tensor)
}

// Save writes opt's state and learning rate to the safetensors file path,
// atomically (path holds either its old contents or all of the new ones).
// opt must be one of this package's optimizers.
func Save(opt Optimizer, path string) error {
	so, ok := opt.(stateful)
	if !ok {
		return fmt.Errorf("optim: save %s: %T has no state this package can save", path, opt)
	}
	ps := so.parameters()
	tensors := map[string]safetensors.Tensor{}
	var saveErr error
	// The Tidy releases what stateOf made (Adam's step counts).
	vram.Tidy(func() {
		for i := range ps {
			for name, t := range so.stateOf(i) {
				key := fmt.Sprintf("state.%d.%s", i, name)
				var st safetensors.Tensor
				var encErr error
				err := vram.Catch(func() { st, encErr = tensorfile.Encode(t) })
				if err == nil {
					err = encErr
				}
				if err != nil {
					saveErr = fmt.Errorf("optim: save %s: %s: %w", path, key, err)
					return
				}
				tensors[key] = st
			}
		}
	})
	if saveErr != nil {
		return saveErr
	}
	meta := map[string]string{
		"format":    "pt",
		"optimizer": so.kind(),
		"params":    strconv.Itoa(len(ps)),
		"lr":        strconv.FormatFloat(opt.LR(), 'g', -1, 64),
	}
	if err := tensorfile.Write(path, tensors, meta); err != nil {
		return fmt.Errorf("optim: save %s: %w", path, err)
	}
	return nil
}

// Load reads the state and learning rate that Save wrote to path into
// opt, which must be an optimizer of the same kind over parameters of the
// same number and shapes (the model's, loaded or not). Each state tensor
// is made on its parameter's device, in its dtype and memory format, and
// replaces what opt had; parameters the file has no state for start
// afresh at their next Step. On any error (another optimizer, another
// parameter list, a missing, unexpected or misshapen tensor, a bad value)
// Load changes nothing.
func Load(opt Optimizer, path string) error {
	so, ok := opt.(stateful)
	if !ok {
		return fmt.Errorf("optim: load %s: %T has no state this package can load", path, opt)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("optim: load %s: %s", path, fmt.Sprintf(format, args...))
	}
	tensors, meta, err := tensorfile.Read(path)
	if err != nil {
		return fmt.Errorf("optim: load %s: %w", path, err)
	}
	ps := so.parameters()
	if got := meta["optimizer"]; got != so.kind() {
		return fail("the file holds the state of %q, not of %s", got, so.kind())
	}
	if got := meta["params"]; got != strconv.Itoa(len(ps)) {
		return fail("the file is for %s parameters, the optimizer has %d", got, len(ps))
	}
	lr, err := strconv.ParseFloat(meta["lr"], 64)
	if err != nil || !(lr >= 0) || lr > math.MaxFloat64 {
		return fail("learning rate %q is not a finite number of at least 0", meta["lr"])
	}
	names := so.stateNames()
	// Check every key, then decode everything on the host, before
	// changing anything.
	byParam := map[int]bool{}
	var problems []string
	for key, st := range tensors {
		i, name, ok := parseStateKey(key, len(ps))
		if !ok || !slices.Contains(names, name) {
			problems = append(problems, fmt.Sprintf("unexpected key %q", key))
			continue
		}
		byParam[i] = true
		want := []int(ps[i].Shape())
		if name == "step" {
			want = nil
		}
		if !slices.Equal(st.Shape, want) {
			problems = append(problems, fmt.Sprintf("%q has shape %v, want %v", key, vram.Shape(st.Shape), vram.Shape(want)))
		}
		if err := tensorfile.Decodable(st.DType); err != nil {
			problems = append(problems, fmt.Sprintf("%q: %v", key, err))
		}
	}
	for i := range byParam {
		for _, name := range names {
			if key := fmt.Sprintf("state.%d.%s", i, name); !hasKey(tensors, key) {
				problems = append(problems, fmt.Sprintf("missing key %q", key))
			}
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fail("%s", strings.Join(problems, "; "))
	}
	decoded := map[int]map[string]*vram.Tensor{}
	release := func() {
		for _, st := range decoded {
			for _, t := range st {
				t.Release()
			}
		}
	}
	for i := range byParam {
		st := map[string]*vram.Tensor{}
		decoded[i] = st
		for _, name := range names {
			key := fmt.Sprintf("state.%d.%s", i, name)
			t, err := decodeState(tensors[key], name, ps[i])
			if err != nil {
				release()
				return fail("%q: %v", key, err)
			}
			st[name] = t
		}
	}
	for i := range ps {
		so.setState(i, decoded[i])
	}
	opt.SetLR(lr)
	return nil
}

// decodeState returns the state tensor name of parameter p from st: a
// tensor of p's shape, dtype, device and memory format, or for "step" a
// 0-dimensional float64 CPU tensor holding a whole number of steps.
func decodeState(st safetensors.Tensor, name string, p *vram.Tensor) (t *vram.Tensor, err error) {
	dt := p.DType()
	if name == "step" {
		dt = vram.Float64
	}
	var decErr error
	err = vram.Catch(func() {
		var host *vram.Tensor
		if host, decErr = tensorfile.Decode(st, dt); decErr != nil {
			return
		}
		if name == "step" {
			if v := host.Item(); !(v >= 0 && v <= 1<<53 && v == float64(int64(v))) {
				host.Release()
				decErr = fmt.Errorf("step %v is not a whole number of steps", v)
				return
			}
			t = host
			return
		}
		defer host.Release()
		t = newState(p, false)
		vram.NoGrad(func() { tensorfile.CopyInto(t, host) })
	})
	if err == nil {
		err = decErr
	}
	if err != nil && t != nil {
		t.Release()
		t = nil
	}
	return t, err
}

// hasKey reports whether tensors holds key.
func hasKey(tensors map[string]safetensors.Tensor, key string) bool {
	_, ok := tensors[key]
	return ok
}

// parseStateKey splits "state.<i>.<name>" with 0 <= i < n.
func parseStateKey(key string, n int) (i int, name string, ok bool) {
	rest, found := strings.CutPrefix(key, "state.")
	if !found {
		return 0, "", false
	}
	num, name, found := strings.Cut(rest, ".")
	if !found || num == "" || (len(num) > 1 && num[0] == '0') {
		return 0, "", false
	}
	i, err := strconv.Atoi(num)
	if err != nil || i < 0 || i >= n {
		return 0, "", false
	}
	return i, name, true
}
