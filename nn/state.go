package nn

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/safetensors"
	"github.com/vramgo/vram/internal/tensorfile"
)

// StateDict returns m's parameters and buffers ([Base.RegisterBuffer]) by
// their dotted names (PyTorch's state_dict keys). A parameter that a
// pruning mask covers ([Maskable]) is keyed by its name with "_orig"
// appended, beside its mask's name+"_mask", as PyTorch's
// torch.nn.utils.prune stores it ("fc.weight_orig", "fc.weight_mask").
// A tensor that layers share (tied weights, head.Weight = embed.Weight) is
// keyed under each of its names, as PyTorch's state_dict keys it, though
// [Base.NamedParameters] lists it once.
// The tensors are the module's own, not copies: they belong to the module
// and must not be released. A nil m gives an empty map.
func StateDict(m Module) map[string]*vram.Tensor {
	if isNil(m) {
		return map[string]*vram.Tensor{}
	}
	named := stateTensors(m)
	aliases := aliasKeys(m, named)
	out := make(map[string]*vram.Tensor, len(named))
	for _, p := range named {
		out[p.Name] = p.Tensor
		for _, a := range aliases[p.Tensor] {
			out[a] = p.Tensor
		}
	}
	return out
}

// stateTensors returns m's parameters, then its buffers, by their
// state-dict keys (see [StateDict]).
func stateTensors(m Module) []NamedParameter {
	if isNil(m) {
		return nil
	}
	named := append(m.NamedParameters(), NamedBuffers(m)...)
	masked := maskedNames(m)
	for i, p := range named {
		if masked[p.Name] {
			named[i].Name = p.Name + origSuffix
		}
	}
	return named
}

// zeroTensor reports whether t is a zero Tensor (&vram.Tensor{}, made
// without a factory), whose methods panic rather than answer: the
// functions that return their errors check for one before they ask a
// tensor anything.
func zeroTensor(t *vram.Tensor) bool {
	return t != nil && vram.Catch(func() { t.Released() }) != nil
}

// origSuffix ends the state-dict key of a parameter that a pruning mask
// covers, as in PyTorch.
const origSuffix = "_orig"

// maskedNames returns the dotted names of m's parameters that a pruning
// mask covers.
func maskedNames(m Module) map[string]bool {
	out := map[string]bool{}
	for _, nm := range NamedModules(m) {
		mk, ok := nm.Module.(Maskable)
		if !ok {
			continue
		}
		for _, p := range nm.Module.NamedParameters() {
			if strings.Contains(p.Name, ".") {
				continue
			}
			if mask, _ := mk.ParameterMask(p.Name); mask != nil {
				name := p.Name
				if nm.Name != "" {
					name = nm.Name + "." + p.Name
				}
				out[name] = true
			}
		}
	}
	return out
}

// Save writes m's parameters and buffers to the safetensors file path, under their
// PyTorch state-dict names and in their own dtypes, with the metadata
// {"format": "pt"} that Hugging Face tools expect; PyTorch reads it with
// safetensors.torch.load_file. A shared tensor (tied weights) is written
// under each of its names, as [StateDict] keys it, so that PyTorch's
// strict load_state_dict of the file finds every key. The file is written to a temporary file in
// the same directory and renamed into place, so path holds either the old
// contents or the complete new ones, never a partial file; a path that
// names something other than a regular file (a directory, a named pipe,
// a device such as /dev/null) is an error. A tensor on a
// device is read in the order of its memory, so that saving a
// channels-last model from a full device needs no memory there. A nil m
// (or a nil pointer) is an error matching vram.ErrArgument.
func Save(m Module, path string) (err error) {
	if isNil(m) {
		return &kindError{msg: fmt.Sprintf("nn: save %s: nil module", path), kinds: []error{vram.ErrArgument}}
	}
	tensors := map[string]safetensors.Tensor{}
	state := stateTensors(m)
	aliases := aliasKeys(m, state)
	for _, p := range state {
		var st safetensors.Tensor
		var encErr error
		err := vram.Catch(func() { st, encErr = tensorfile.Encode(p.Tensor) })
		if err == nil {
			err = encErr
		}
		if err != nil {
			return fmt.Errorf("nn: save %s: parameter %q: %w", path, p.Name, err)
		}
		tensors[p.Name] = st
		for _, a := range aliases[p.Tensor] {
			tensors[a] = st
		}
	}
	if err := tensorfile.Write(path, tensors, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("nn: save %s: %w", path, err)
	}
	return nil
}

// Load reads the safetensors file path, written by [Save] or by PyTorch's
// safetensors.torch.save_file(model.state_dict(), path), into m's
// parameters and buffers in place: each keeps its identity, device and
// dtype, and values of another dtype are converted. The file must hold
// exactly m's state-dict keys ([StateDict]) with the same shapes
// (PyTorch's strict loading); otherwise Load returns an error listing the
// missing and unexpected keys and the shape mismatches, and changes
// nothing. As in PyTorch, a file may lack the "num_batches_tracked" of a
// [BatchNorm2d] or [BatchNorm1d] (checkpoints written before PyTorch 0.4.1
// have none), which then keeps its value. A tensor that layers share
// (tied weights) is loaded once; it may be under any of its names in the
// file (safetensors.torch.save_model keeps one), or under several, as
// [Save] and PyTorch's state_dict list it,
// which must then hold one value (an error matching vram.ErrArgument
// otherwise: the file is not of a model that shares the tensor, and
// loading one of the values would lose the other). A pruned parameter is read from name+"_orig" or, in files
// written before that key was used, from name.
//
// Errors match vram's sentinels under errors.Is: vram.ErrArgument for
// missing or unexpected keys, for a file that is not valid safetensors,
// for the "scale" of an int8 quantized layer ([Linear.SetInt8Weight])
// with values that are not positive and finite in the model's dtype, which
// SetInt8Weight refuses too, and for a parameter or buffer that is a zero
// Tensor (made without a factory),
// vram.ErrShape for a shape mismatch, vram.ErrDType for a dtype that
// cannot be read or for int8 values (quantized weights, package nn/quant)
// in the file where the model has floating-point ones or the other way
// round, vram.ErrReleased for a released tensor; a file that
// cannot be opened gives the *fs.PathError (fs.ErrNotExist, ...).
//
// The values are decoded on the host and written into each tensor in
// place, so that loading into a model on a full device needs no device
// memory beyond the model's own: a tensor that is not contiguous but
// fills one block of memory (a channels-last convolution weight) is
// written in the order of its memory, and only one with gaps or overlaps
// takes a temporary of its size. An error from the device (out of memory
// for that temporary, a released parameter) is returned, not panicked,
// and may leave the tensors before the failing one loaded.
func Load(m Module, path string) error {
	_, err := load(m, path, true)
	return err
}

// LoadResult is what [LoadNonStrict] did not load: PyTorch's
// missing_keys and unexpected_keys.
type LoadResult struct {
	Missing    []string // m's keys that the file lacks, left as they were, in m's order
	Unexpected []string // the file's keys that m lacks, ignored, sorted
}

// LoadNonStrict is [Load] that loads the keys the module and the file
// share and reports the others rather than refusing them (PyTorch's
// load_state_dict(strict=False)), as when a pretrained backbone is loaded
// into a model with a new head. As in PyTorch, a shared key whose shapes
// differ is still an error that changes nothing.
func LoadNonStrict(m Module, path string) (LoadResult, error) {
	return load(m, path, false)
}

// load is Load, strict or not.
func load(m Module, path string, strict bool) (LoadResult, error) {
	if isNil(m) {
		return LoadResult{}, &kindError{msg: fmt.Sprintf("nn: load %s: nil module", path), kinds: []error{vram.ErrArgument}}
	}
	tensors, _, err := tensorfile.Read(path)
	if err != nil {
		// err matches vram.ErrArgument unless the file could not be opened.
		return LoadResult{}, &kindError{msg: fmt.Sprintf("nn: load %s: %v", path, err), kinds: []error{err}}
	}
	return loadTensors(m, path, tensors, strict, nil, nil)
}

// LoadStateDict copies state, tensors by their state-dict keys, into m's
// parameters and buffers in place, as PyTorch's
// module.load_state_dict(state_dict, strict) does: with the checks, the
// dtype conversions and the results of [Load] (strict) or [LoadNonStrict]
// (not strict), and the same errors, a key of state taking the place of a
// tensor of the file. The tensors of state may live on any device and are
// neither changed nor released: they stay the caller's. A nil or released
// tensor in state is an error matching vram.ErrReleased that changes
// nothing, and a zero Tensor (made without a factory) one matching
// vram.ErrArgument.
// Each tensor of state is read when it is loaded, so that loading takes
// host memory for about one tensor beside the two models.
// Package nn/torchload reads state dicts from torch.save files.
func LoadStateDict(m Module, state map[string]*vram.Tensor, strict bool) (LoadResult, error) {
	const src = "state dict"
	if isNil(m) {
		return LoadResult{}, &kindError{msg: "nn: load " + src + ": nil module", kinds: []error{vram.ErrArgument}}
	}
	tensors := make(map[string]safetensors.Tensor, len(state))
	for _, name := range slices.Sorted(maps.Keys(state)) {
		t := state[name]
		if zeroTensor(t) {
			return LoadResult{}, &kindError{msg: fmt.Sprintf("nn: load %s: %q is a zero Tensor, made without a factory", src, name), kinds: []error{vram.ErrArgument}}
		}
		if t == nil || t.Released() {
			return LoadResult{}, &kindError{msg: fmt.Sprintf("nn: load %s: %q is nil or released", src, name), kinds: []error{vram.ErrReleased}}
		}
		st, err := tensorfile.Header(t)
		if err != nil {
			return LoadResult{}, &kindError{msg: fmt.Sprintf("nn: load %s: %q: %v", src, name, err), kinds: []error{vram.ErrDType}}
		}
		tensors[name] = st
	}
	// Each tensor's bytes are read when it is loaded, so that the host
	// holds one tensor of state at a time, not a copy of all of it.
	fetch := func(name string) ([]byte, error) {
		st, err := tensorfile.Encode(state[name])
		return st.Data, err
	}
	return loadTensors(m, src, tensors, strict, fetch, nil)
}

func init() {
	tensorfile.LoadInto = func(m any, src string, tensors map[string]safetensors.Tensor, strict bool,
		fetch func(string) ([]byte, error), verify func([]string) error) ([]string, []string, error) {
		mod, _ := m.(Module)
		if isNil(mod) {
			return nil, nil, &kindError{msg: "nn: load " + src + ": nil module", kinds: []error{vram.ErrArgument}}
		}
		res, err := loadTensors(mod, src, tensors, strict, fetch, verify)
		return res.Missing, res.Unexpected, err
	}
}

// loadTensors is load from tensors already read from src (a path, for
// messages). A tensor without Data has its bytes from fetch, called when
// they are needed, one tensor at a time; verify, when not nil, checks
// before anything changes that fetch will give those to load.
func loadTensors(m Module, path string, tensors map[string]safetensors.Tensor, strict bool,
	fetch func(name string) ([]byte, error), verify func(names []string) error) (LoadResult, error) {
	var res LoadResult
	var params []NamedParameter // the ones to load, by their keys in the file
	var problems []string
	kinds := []error{} // the sentinels the problems match
	kind := func(k error) {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	have := map[string]bool{}
	loaded := map[*vram.Tensor]int{} // the index in params of each tensor loaded
	var ties []tie                   // other names of shared tensors in the file
	masked := maskedNames(m)
	optional := optionalKeys(m)
	state := stateTensors(m)
	aliases := aliasKeys(m, state)
	for _, p := range state {
		if old, ok := strings.CutSuffix(p.Name, origSuffix); ok && masked[old] {
			// A pruned parameter, in a file written before "_orig".
			_, hasKey := tensors[p.Name]
			if _, hasOld := tensors[old]; hasOld && !hasKey {
				p.Name = old
			}
		}
		if _, ok := tensors[p.Name]; !ok {
			// A shared tensor, in a file that keeps it under another of
			// its names (safetensors.torch.save_model keeps one).
			for _, a := range aliases[p.Tensor] {
				if _, ok := tensors[a]; ok {
					p.Name = a
					break
				}
			}
		}
		have[p.Name] = true
		st, ok := tensors[p.Name]
		if !ok {
			if !optional[p.Name] {
				res.Missing = append(res.Missing, p.Name)
			}
			continue
		}
		loaded[p.Tensor] = len(params)
		params = append(params, p)
		if zeroTensor(p.Tensor) {
			problems = append(problems, fmt.Sprintf("%q is a zero Tensor, made without a factory", p.Name))
			kind(vram.ErrArgument)
			continue
		}
		if p.Tensor.Released() {
			problems = append(problems, fmt.Sprintf("%q was released", p.Name))
			kind(vram.ErrReleased)
			continue
		}
		if !slices.Equal(st.Shape, []int(p.Tensor.Shape())) {
			problems = append(problems, fmt.Sprintf("%q has shape %s in the file and %v in the model", p.Name, safetensors.ShapeString(st.Shape), p.Tensor.Shape()))
			kind(vram.ErrShape)
		}
		if err := tensorfile.Decodable(st.DType); err != nil {
			problems = append(problems, fmt.Sprintf("%q: %v", p.Name, err))
			kind(vram.ErrDType)
		} else if msg := quantMismatch(p.Name, st.DType, p.Tensor.DType()); msg != "" {
			problems = append(problems, msg)
			kind(vram.ErrDType)
		}
	}
	// The other names of a shared tensor are expected too, as in
	// PyTorch's state_dict, which lists it under each; the tensor is
	// loaded from one of them, and the others must fit it.
	for _, p := range state {
		for _, a := range aliases[p.Tensor] {
			st, ok := tensors[a]
			if !ok || have[a] {
				continue
			}
			have[a] = true
			if i, ok := loaded[p.Tensor]; ok {
				ties = append(ties, tie{alias: a, param: i})
			}
			if zeroTensor(p.Tensor) {
				continue // refused above under its first name
			}
			if !slices.Equal(st.Shape, []int(p.Tensor.Shape())) {
				problems = append(problems, fmt.Sprintf("%q has shape %s in the file and %v in the model", a, safetensors.ShapeString(st.Shape), p.Tensor.Shape()))
				kind(vram.ErrShape)
			}
			if err := tensorfile.Decodable(st.DType); err != nil {
				problems = append(problems, fmt.Sprintf("%q: %v", a, err))
				kind(vram.ErrDType)
			} else if msg := quantMismatch(a, st.DType, p.Tensor.DType()); msg != "" {
				problems = append(problems, msg)
				kind(vram.ErrDType)
			}
		}
	}
	for name := range tensors {
		if !have[name] {
			res.Unexpected = append(res.Unexpected, name)
		}
	}
	sort.Strings(res.Unexpected)
	if strict || len(problems) > 0 {
		var parts []string
		if strict && len(res.Missing) > 0 {
			parts = append(parts, "missing keys "+quoteAll(res.Missing))
			kind(vram.ErrArgument)
		}
		if strict && len(res.Unexpected) > 0 {
			parts = append(parts, "unexpected keys "+quoteAll(res.Unexpected))
			kind(vram.ErrArgument)
		}
		parts = append(parts, problems...)
		if len(parts) > 0 {
			return res, &kindError{msg: fmt.Sprintf("nn: load %s: %s", path, strings.Join(parts, "; ")), kinds: kinds}
		}
	}
	// Check that every value can be read and decodes before changing any
	// tensor, so that one that cannot leaves the model as it was; then
	// decode each in turn and copy it in, so that the host holds one
	// decoded tensor at a time, not a second copy of the model.
	//
	// full returns the tensor of the file named name with its bytes,
	// which fetch gives when the map has none.
	full := func(name string) (st safetensors.Tensor, err error) {
		st = tensors[name]
		if st.Data == nil && fetch != nil {
			var fetchErr error
			if err = vram.Catch(func() { st.Data, fetchErr = fetch(name) }); err == nil {
				err = fetchErr
			}
		}
		return st, err
	}
	if verify != nil {
		names := make([]string, 0, len(params)+len(ties))
		for _, p := range params {
			names = append(names, p.Name)
		}
		for _, tie := range ties {
			names = append(names, tie.alias)
		}
		if err := verify(names); err != nil {
			return res, fmt.Errorf("nn: load %s: %w", path, err)
		}
	}
	decode := func(name string, dt vram.DType) (*vram.Tensor, error) {
		st, err := full(name)
		if err != nil {
			return nil, err
		}
		var t *vram.Tensor
		var decErr error
		err = vram.Catch(func() { t, decErr = tensorfile.Decode(st, dt) })
		if err == nil {
			err = decErr
		}
		return t, err
	}
	// A quantized layer's scale must also be positive and finite once
	// converted to the model's dtype, as SetInt8Weight checks it: the
	// layer would give NaN or zeros otherwise. Scales are small ([out]
	// values), so each is decoded here and again when it is copied in.
	scales := int8Scales(m)
	for _, p := range params {
		if scales[p.Tensor] {
			src, err := decode(p.Name, p.Tensor.DType())
			n := 0
			if err == nil {
				n, err = badScales(src)
				src.Release()
			}
			if err != nil {
				return res, fmt.Errorf("nn: load %s: %q: %w", path, p.Name, err)
			}
			if n > 0 {
				return res, &kindError{msg: fmt.Sprintf("nn: load %s: %q, the scale of an int8 quantized layer, holds %d values that are not positive and finite in %s (NaN, an infinity, zero or negative); the layer would compute NaN or lose its weight",
					path, p.Name, n, p.Tensor.DType()), kinds: []error{vram.ErrArgument}}
			}
			continue
		}
		if tensorfile.AsIs(tensors[p.Name], p.Tensor.DType()) {
			continue // decodes
		}
		st, err := full(p.Name)
		if err == nil {
			var decErr error
			err = vram.Catch(func() { decErr = tensorfile.CheckDecode(st, p.Tensor.DType()) })
			if err == nil {
				err = decErr
			}
		}
		if err != nil {
			return res, fmt.Errorf("nn: load %s: %q: %w", path, p.Name, err)
		}
	}
	// A shared tensor's other names must hold its value: a file whose
	// two names differ is not of a model that shares them, and loading
	// either value would lose the other.
	for _, tie := range ties {
		p := params[tie.param]
		a, err := full(tie.alias)
		if err != nil {
			return res, fmt.Errorf("nn: load %s: %q: %w", path, tie.alias, err)
		}
		b, err := full(p.Name)
		if err != nil {
			return res, fmt.Errorf("nn: load %s: %q: %w", path, p.Name, err)
		}
		if a.DType == b.DType && bytes.Equal(a.Data, b.Data) {
			continue
		}
		src, err := decode(p.Name, p.Tensor.DType())
		if err != nil {
			return res, fmt.Errorf("nn: load %s: %q: %w", path, p.Name, err)
		}
		alias, err := decode(tie.alias, p.Tensor.DType())
		if err != nil {
			src.Release()
			return res, fmt.Errorf("nn: load %s: %q: %w", path, tie.alias, err)
		}
		same := bytes.Equal(alias.RawBytes(), src.RawBytes())
		alias.Release()
		src.Release()
		if !same {
			return res, &kindError{msg: fmt.Sprintf("nn: load %s: %q and %q are one tensor in the model (shared weights) but hold different values in the file",
				path, p.Name, tie.alias), kinds: []error{vram.ErrArgument}}
		}
	}
	for _, p := range params {
		if tensorfile.AsIs(tensors[p.Name], p.Tensor.DType()) && p.Tensor.IsContiguous() {
			// The file's bytes are the tensor's: straight in.
			st, err := full(p.Name)
			if err == nil {
				err = vram.Catch(func() { vram.NoGrad(func() { p.Tensor.SetRawBytes(st.Data) }) })
			}
			if err != nil {
				return res, fmt.Errorf("nn: load %s: %q: %w", path, p.Name, err)
			}
			continue
		}
		src, err := decode(p.Name, p.Tensor.DType())
		if err == nil {
			err = vram.Catch(func() { vram.NoGrad(func() { tensorfile.CopyInto(p.Tensor, src) }) })
			src.Release()
		}
		if err != nil {
			return res, fmt.Errorf("nn: load %s: %q: %w", path, p.Name, err)
		}
	}
	return res, nil
}

// tie is another name, in the file, of the shared tensor of params[param].
type tie struct {
	alias string
	param int
}

// quantMismatch describes the loading of the file's tensor name, of
// safetensors dtype file, into a model tensor of dtype model when one of
// the two holds int8 quantized values and the other floating-point ones
// (a quantized checkpoint and a float model, or the other way round):
// converting would turn the int8 codes into weights a hundred times too
// large, or truncate float weights to zeros. It returns "" otherwise.
func quantMismatch(name, file string, model vram.DType) string {
	fileFloat := strings.HasPrefix(file, "F") || file == "BF16"
	switch {
	case file == "I8" && model.IsFloat():
		return fmt.Sprintf("%q holds int8 quantized values in the file and is %s in the model; quantize the model (package nn/quant) before loading a quantized file", name, model)
	case model == vram.Int8 && fileFloat:
		return fmt.Sprintf("%q is %s in the file and holds int8 quantized values in the model; load a float file before quantizing the model", name, file)
	}
	return ""
}

// aliasKeys returns, for each tensor of state (m's state tensors) that m
// holds under more than one name (weights shared between layers), its
// other state-dict keys, sorted: those that [Base.NamedParameters], which
// lists a tensor once, leaves out and PyTorch's state_dict lists.
func aliasKeys(m Module, state []NamedParameter) map[*vram.Tensor][]string {
	primary := map[*vram.Tensor]string{}
	for _, p := range state {
		primary[p.Tensor] = p.Name
	}
	out := map[*vram.Tensor][]string{}
	var path []Module // the modules being walked, against cycles
	var walk func(prefix string, m Module)
	walk = func(prefix string, m Module) {
		if reflect.TypeOf(m).Comparable() {
			if slices.Contains(path, m) {
				return
			}
			path = append(path, m)
			defer func() { path = path[:len(path)-1] }()
		}
		if w, ok := m.(Wrapper); ok {
			if inner := w.Unwrap(); !isNil(inner) {
				walk(prefix, inner)
				return
			}
		}
		own := append(m.NamedParameters(), NamedBuffers(m)...)
		for _, p := range own {
			if strings.Contains(p.Name, ".") {
				continue // a sub-module's, reached below
			}
			key := prefix + p.Name
			if name, ok := primary[p.Tensor]; ok && name != key && name != key+origSuffix && !slices.Contains(out[p.Tensor], key) {
				out[p.Tensor] = append(out[p.Tensor], key)
			}
		}
		for _, c := range m.NamedChildren() {
			walk(prefix+c.Name+".", c.Module)
		}
	}
	walk("", m)
	for _, keys := range out {
		sort.Strings(keys)
	}
	return out
}

// optionalStater is a module with buffers that a file may lack: loading
// such a file keeps their values, as PyTorch's _load_from_state_dict of
// the module fills them in.
type optionalStater interface {
	// optionalState returns the names of those buffers, relative to the
	// module.
	optionalState() []string
}

// optionalKeys returns the state-dict keys of m that a file may lack.
func optionalKeys(m Module) map[string]bool {
	out := map[string]bool{}
	for _, nm := range NamedModules(m) {
		o, ok := nm.Module.(optionalStater)
		if !ok {
			continue
		}
		for _, name := range o.optionalState() {
			if nm.Name != "" {
				name = nm.Name + "." + name
			}
			out[name] = true
		}
	}
	return out
}

// kindError is an error of Load with its own message that matches each of
// kinds (vram's sentinels, an underlying error) under errors.Is and
// errors.As.
type kindError struct {
	msg   string
	kinds []error
}

func (e *kindError) Error() string   { return e.msg }
func (e *kindError) Unwrap() []error { return e.kinds }

// maxNamesShown is the number of keys an error message of Load lists
// before it counts the rest, so that a file of a million unexpected keys
// gives a message to read, not megabytes; [LoadResult] has them all.
const maxNamesShown = 20

// quoteAll formats names as a list of quoted strings, up to maxNamesShown
// of them.
func quoteAll(names []string) string {
	q := make([]string, 0, min(len(names), maxNamesShown)+1)
	for _, n := range names[:min(len(names), maxNamesShown)] {
		q = append(q, fmt.Sprintf("%q", safetensors.Cut(n)))
	}
	if len(names) > maxNamesShown {
		q = append(q, fmt.Sprintf("and %d more", len(names)-maxNamesShown))
	}
	return "[" + strings.Join(q, ", ") + "]"
}
