package optim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
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
// (a 0-dimensional float32, as PyTorch keeps it) for Adam and AdamW, and
// "state.<i>.max_exp_avg_sq" with amsgrad; "state.<i>.square_avg",
// "state.<i>.grad_avg" (centered), "state.<i>.momentum_buffer" (with
// momentum) and "state.<i>.step" for RMSprop; "state.<i>.sum" and
// "state.<i>.step" for Adagrad; "exp_avg" and "exp_inf" for Adamax,
// "exp_avg", "exp_avg_sq" and "mu_product" for NAdam, "exp_avg" and
// "exp_avg_sq" for RAdam, "square_avg" and "acc_delta" for Adadelta,
// "ax", "eta" and "mu" for ASGD, "prev" and "step_size" for Rprop,
// each with "step" (mu_product, eta and
// mu are 0-dimensional float32, as in PyTorch); where
// <i> is the parameter's position in the list the optimizer was made with,
// and only parameters that have state (that were stepped) appear; the
// parameters of all groups are numbered in one sequence, group by group,
// as in PyTorch. Its metadata names the optimizer and the number of
// parameters, and "param_groups" holds PyTorch's param_groups as JSON:
// each group's hyper-parameters by PyTorch's names ("lr", "momentum",
// "betas", ...) and the numbers of its parameters ("params"), which Load
// restores, with "initial_lr", the rate a group had before its first
// Schedule, when it has one. "lr" holds the first group's learning rate, for files written
// before parameter groups, which Load still reads (setting every group's
// rate to it).

// stateful is an optimizer whose state Save and Load store.
type stateful interface {
	GroupedOptimizer
	kind() string
	parameters() []*vram.Tensor
	// groupRange returns where group i starts and ends in parameters.
	groupRange(i int) (start, end int)
	// hypers returns the hyper-parameters of group i by PyTorch's names.
	hypers(i int) map[string]any
	// restoreGroups checks opts[k], the hyper-parameters to give group k,
	// and returns a function that gives them, or an error.
	restoreGroups(opts [][]Option) (func(), error)
	// stateOf returns the state tensors of parameter i by name, nil when
	// it has none: the optimizer's own, or new ones that a vram.Tidy
	// around the call releases.
	stateOf(i int) map[string]*vram.Tensor
	// stateNames returns the names a parameter's state may have.
	stateNames() []string
	// stateNeeded returns the names parameter i's state must have when
	// it has any, for the Options opts of its group in a checkpoint.
	stateNeeded(i int, opts []Option) []string
	// setState gives parameter i the state st (tensors of the names of
	// stateNames, the parameter's shape, dtype, device and format, or nil
	// for none), which the optimizer takes over, releasing what it had.
	setState(i int, st map[string]*vram.Tensor)
}

// Save writes opt's state and the hyper-parameters of its parameter groups
// to the safetensors file path,
// atomically (path holds either its old contents or all of the new ones);
// a path that names something other than a regular file (a directory, a
// named pipe, a device) is an error.
// opt must be one of this package's optimizers.
func Save(opt Optimizer, path string) error {
	if isNil(opt) {
		return errorf(vram.ErrArgument, "optim: save %s: nil optimizer", path)
	}
	so, ok := opt.(stateful)
	if !ok {
		return errorf(vram.ErrArgument, "optim: save %s: %T has no state this package can save", path, opt)
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
	groups := make([]map[string]any, so.NumGroups())
	for k := range groups {
		groups[k] = so.hypers(k)
		start, end := so.groupRange(k)
		idx := make([]int, 0, end-start)
		for i := start; i < end; i++ {
			idx = append(idx, i)
		}
		groups[k]["params"] = idx
		if ir, ok := so.(initialRated); ok {
			if lr, ok := ir.initialLR(k); ok {
				groups[k]["initial_lr"] = lr
			}
		}
	}
	pg, err := json.Marshal(groups)
	if err != nil {
		return fmt.Errorf("optim: save %s: %w", path, err)
	}
	meta := map[string]string{
		"format":       "pt",
		"optimizer":    so.kind(),
		"params":       strconv.Itoa(len(ps)),
		"lr":           strconv.FormatFloat(opt.LR(), 'g', -1, 64),
		"param_groups": string(pg),
	}
	if err := tensorfile.Write(path, tensors, meta); err != nil {
		return fmt.Errorf("optim: save %s: %w", path, err)
	}
	return nil
}

// Load reads the state and the hyper-parameters of the parameter groups
// that Save wrote to path into opt, which must be an optimizer of the
// same kind with groups of the same sizes over parameters of the same
// shapes (the model's, loaded or not), as PyTorch's load_state_dict
// requires. Every hyper-parameter of every group is restored, as in
// PyTorch. Each state tensor
// is made on its parameter's device, in its dtype and memory format, and
// replaces what opt had; parameters the file has no state for start
// afresh at their next Step. On any error Load changes nothing. A file
// that cannot be opened gives the *fs.PathError; every other error (a
// file that is not valid safetensors, another optimizer, another
// parameter list, a missing, unexpected or misshapen tensor, a bad value)
// matches vram.ErrArgument under errors.Is.
func Load(opt Optimizer, path string) error {
	if isNil(opt) {
		return errorf(vram.ErrArgument, "optim: load %s: nil optimizer", path)
	}
	so, ok := opt.(stateful)
	if !ok {
		return errorf(vram.ErrArgument, "optim: load %s: %T has no state this package can load", path, opt)
	}
	fail := func(format string, args ...any) error {
		return errorf(vram.ErrArgument, "optim: load %s: %s", path, fmt.Sprintf(format, args...))
	}
	tensors, meta, err := tensorfile.Read(path)
	if err != nil {
		return fmt.Errorf("optim: load %s: %w", path, err)
	}
	ps := so.parameters()
	if got := meta["optimizer"]; got != so.kind() {
		return fail("the file holds the state of %q, not of %s", safetensors.Cut(got), so.kind())
	}
	if got := meta["params"]; got != strconv.Itoa(len(ps)) {
		return fail("the file is for %s parameters, the optimizer has %d", safetensors.Cut(got), len(ps))
	}
	var setGroups func()
	var opts [][]Option   // by group; nil for a file without param_groups
	var initial []float64 // by group, NaN where the file has none
	if pg, ok := meta["param_groups"]; ok {
		opts, initial, err = groupOptions(so, pg)
		if err != nil {
			return fail("param_groups: %v", err)
		}
		if setGroups, err = so.restoreGroups(opts); err != nil {
			return fail("param_groups: %v", err)
		}
	} else {
		lr, err := strconv.ParseFloat(meta["lr"], 64)
		if err != nil || !(lr >= 0) || lr > math.MaxFloat64 {
			return fail("learning rate %q is not a finite number of at least 0", safetensors.Cut(meta["lr"]))
		}
		setGroups = func() { opt.SetLR(lr) }
	}
	names := so.stateNames()
	// Check every key, then decode everything on the host, before
	// changing anything.
	byParam := map[int]bool{}
	var problems []string
	for key, st := range tensors {
		i, name, ok := parseStateKey(key, len(ps))
		if !ok || !slices.Contains(names, name) {
			problems = append(problems, fmt.Sprintf("unexpected key %q", safetensors.Cut(key)))
			continue
		}
		byParam[i] = true
		want := []int(ps[i].Shape())
		if name == "step" || isScalarState(so, name) {
			want = nil
		}
		if !slices.Equal(st.Shape, want) {
			problems = append(problems, fmt.Sprintf("%q has shape %s, want %v", key, safetensors.ShapeString(st.Shape), vram.Shape(want)))
		}
		if err := tensorfile.Decodable(st.DType); err != nil {
			problems = append(problems, fmt.Sprintf("%q: %v", key, err))
		}
	}
	needed := func(i int) []string {
		var o []Option
		if opts != nil {
			o = opts[groupIndex(so, i)]
		}
		return so.stateNeeded(i, o)
	}
	for i := range byParam {
		for _, name := range needed(i) {
			if key := fmt.Sprintf("state.%d.%s", i, name); !hasKey(tensors, key) {
				problems = append(problems, fmt.Sprintf("missing key %q", key))
			}
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		// A file of a million unexpected keys gives a message to read.
		const maxShown = 20
		if n := len(problems); n > maxShown {
			problems = append(problems[:maxShown], fmt.Sprintf("and %d more problems", n-maxShown))
		}
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
			if !hasKey(tensors, key) {
				continue // not needed, as checked above
			}
			t, err := decodeState(tensors[key], name, isScalarState(so, name), ps[i])
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
	setGroups()
	if ir, ok := so.(initialRated); ok {
		for k, lr := range initial { // NaN: none, as the file has none
			ir.setInitialLR(k, lr)
		}
	}
	return nil
}

// groupIndex returns the group of parameter i of so.
func groupIndex(so stateful, i int) int {
	k := 0
	for k+1 < so.NumGroups() {
		if start, _ := so.groupRange(k + 1); start > i {
			break
		}
		k++
	}
	return k
}

// groupOptions decodes the param_groups JSON pg, checks that its groups
// hold the parameters of so's groups, and returns each group's
// hyper-parameters as Options, and each group's "initial_lr" (the rate
// before its first Schedule; NaN where there is none). Keys this package
// does not use (PyTorch's "foreach", "fused" and the like) are ignored.
func groupOptions(so stateful, pg string) ([][]Option, []float64, error) {
	groups, err := decodeGroups(pg)
	if err != nil {
		return nil, nil, err
	}
	if len(groups) != so.NumGroups() {
		return nil, nil, fmt.Errorf("the file has %d parameter groups, the optimizer %d", len(groups), so.NumGroups())
	}
	opts := make([][]Option, len(groups))
	initial := make([]float64, len(groups))
	for k, g := range groups {
		// json.Unmarshal takes null as "leave the value alone", which
		// would load a rate or momentum of 0 without a word.
		for _, key := range slices.Sorted(maps.Keys(g)) {
			if isNull(g[key]) && (key == "params" || key == "initial_lr" || slices.Contains(groupKeys, key)) {
				return nil, nil, fmt.Errorf("group %d: %s is null", k, key)
			}
		}
		initial[k] = math.NaN()
		if raw, ok := g["initial_lr"]; ok {
			if err := json.Unmarshal(raw, &initial[k]); err != nil {
				return nil, nil, fmt.Errorf("group %d: initial_lr: %v", k, err)
			}
			if err := checkRate(initial[k]); err != nil {
				return nil, nil, fmt.Errorf("group %d: initial_lr: %v", k, err)
			}
		}
	}
	for k, g := range groups {
		var idx []int
		if err := json.Unmarshal(g["params"], &idx); err != nil {
			return nil, nil, fmt.Errorf("group %d: params: %v", k, err)
		}
		start, end := so.groupRange(k)
		if len(idx) != end-start {
			return nil, nil, fmt.Errorf("group %d has %d parameters in the file, %d in the optimizer", k, len(idx), end-start)
		}
		for j, i := range idx {
			if i != start+j {
				return nil, nil, fmt.Errorf("group %d: parameter %d is numbered %d, want %d", k, j, i, start+j)
			}
		}
		if _, ok := g["lr"]; !ok {
			return nil, nil, fmt.Errorf("group %d has no learning rate", k)
		}
		for _, key := range groupKeys {
			raw, ok := g[key]
			if !ok {
				continue
			}
			var err error
			var o Option
			switch key {
			case "nesterov", "maximize", "amsgrad", "centered", "decoupled_weight_decay":
				var b bool
				err = json.Unmarshal(raw, &b)
				o = Option{key: key, b: b}
			case "betas", "etas", "step_sizes":
				var b []float64
				if err = json.Unmarshal(raw, &b); err == nil && len(b) != 2 {
					err = fmt.Errorf("%d values, want 2", len(b))
				}
				if err == nil {
					o = Option{key: key, x: b[0], y: b[1]}
				}
			default:
				var x float64
				err = json.Unmarshal(raw, &x)
				o = Option{key: key, x: x}
			}
			if err != nil {
				return nil, nil, fmt.Errorf("group %d: %s: %v", k, key, err)
			}
			opts[k] = append(opts[k], o)
		}
	}
	return opts, initial, nil
}

// decodeGroups decodes pg, a JSON array of objects, into one map per
// object. Unlike json.Unmarshal, which lets the last of two members of one
// name win, it refuses a group that gives a member twice ("lr":0.1,"lr":5),
// whose value would otherwise depend on which one a reader keeps.
func decodeGroups(pg string) ([]map[string]json.RawMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(pg), &items); err != nil {
		return nil, err
	}
	groups := make([]map[string]json.RawMessage, len(items))
	for k, item := range items {
		dec := json.NewDecoder(bytes.NewReader(item))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return nil, fmt.Errorf("group %d is not a JSON object", k)
		}
		groups[k] = map[string]json.RawMessage{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("group %d: %v", k, err)
			}
			key := tok.(string) // a member name, in a valid object
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("group %d: %q: %v", k, safetensors.Cut(key), err)
			}
			if _, dup := groups[k][key]; dup {
				return nil, fmt.Errorf("group %d: %q given twice", k, safetensors.Cut(key))
			}
			groups[k][key] = v
		}
	}
	return groups, nil
}

// groupKeys are the hyper-parameters of param_groups that Load restores,
// by PyTorch's names.
var groupKeys = []string{"lr", "momentum", "dampening", "weight_decay", "eps", "nesterov", "maximize", "amsgrad", "betas",
	"alpha", "centered", "lr_decay", "initial_accumulator_value", "momentum_decay", "decoupled_weight_decay",
	"rho", "lambd", "t0", "etas", "step_sizes"}

// isNull reports whether raw is the JSON null.
func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// scalarStater is an optimizer with 0-dimensional state other than
// "step" (NAdam's mu_product, ASGD's eta and mu).
type scalarStater interface {
	scalarState(name string) bool
}

// isScalarState reports whether name is a 0-dimensional state of so other
// than "step".
func isScalarState(so stateful, name string) bool {
	ss, ok := so.(scalarStater)
	return ok && ss.scalarState(name)
}

// decodeState returns the state tensor name of parameter p from st: a
// tensor of p's shape, dtype, device and memory format, or for "step" a
// 0-dimensional float64 CPU tensor holding a whole number of steps, or
// for another scalar state a 0-dimensional float64 CPU tensor holding a
// finite number of at least 0.
func decodeState(st safetensors.Tensor, name string, scalar bool, p *vram.Tensor) (t *vram.Tensor, err error) {
	dt := p.DType()
	if name == "step" || scalar {
		dt = vram.Float64
	}
	var decErr error
	err = vram.Catch(func() {
		var host *vram.Tensor
		if host, decErr = tensorfile.Decode(st, dt); decErr != nil {
			return
		}
		if name == "step" {
			if v := host.Item(); !(v >= 0 && v <= maxSteps && v == float64(int64(v))) {
				host.Release()
				decErr = fmt.Errorf("step %v is not a whole number of steps", v)
				return
			}
			t = host
			return
		}
		if scalar {
			// NAdam's mu_product and ASGD's eta and mu are products,
			// rates and averaging weights that no step makes negative.
			if v := host.Item(); !(v >= 0) || math.IsInf(v, 1) {
				host.Release()
				decErr = fmt.Errorf("%s %v is not a finite number of at least 0", name, v)
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
	// Only the digits Save writes: strconv.Atoi also takes "+0" and "-0",
	// which would name parameter 0 a second time.
	if strings.TrimLeft(num, "0123456789") != "" {
		return 0, "", false
	}
	i, err := strconv.Atoi(num)
	if err != nil || i < 0 || i >= n {
		return 0, "", false
	}
	return i, name, true
}
