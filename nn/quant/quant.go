package quant

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// qmax is the largest magnitude of a symmetric int8 value: -128 is left
// out so that the range is symmetric, as PyTorch's
// per_channel_weight_observer_range_neg_127_to_127 does (its default
// per-channel weight observer takes [-128, 127] and divides max|w| by
// 127.5 instead).
const qmax = 127

// quantErr returns the error of a bad call: an *vram.Error of the given
// kind (vram.ErrArgument, vram.ErrReleased), so that errors.Is matches it.
func quantErr(kind error, format string, args ...any) error {
	return &vram.Error{Op: "quantize", Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// Weight returns the symmetric per-output-channel int8 quantization of a
// floating-point weight w [out, in]: wq [out, in] (int8) and scale [out]
// of w's dtype, with w ≈ wq[n,k]·scale[n]. A row of zeros gets scale 1,
// and a row whose max|w|/127 rounds to 0 in w's dtype (float16 rows below
// about 4e-6) the smallest positive value of that dtype.
// It returns an error matching vram.ErrArgument for a weight that is not
// a 2-d floating-point tensor or holds NaN or Inf (vram.ErrReleased for a
// released one). The caller owns wq and scale; w is not changed.
func Weight(w *vram.Tensor) (wq, scale *vram.Tensor, err error) {
	if w == nil {
		return nil, nil, quantErr(vram.ErrArgument, "nil weight")
	}
	if w.Released() {
		return nil, nil, quantErr(vram.ErrReleased, "the weight was released")
	}
	if !w.DType().IsFloat() || len(w.Shape()) != 2 {
		return nil, nil, quantErr(vram.ErrArgument, "weight is %v %s, want a 2-d floating-point [out, in] tensor", w.Shape(), w.DType())
	}
	out, in := w.Shape()[0], w.Shape()[1]
	ct := vram.Float32
	if w.DType() == vram.Float64 {
		ct = vram.Float64
	}
	var bad error
	err = vram.Catch(func() {
		vram.NoGrad(func() {
			vram.Tidy(func() {
				vram.Region(nn.ParametersRegion, func() {
					if in == 0 || out == 0 {
						wq = vram.Keep(vram.Zeros(vram.Shape{out, in}, vram.Int8, w.Device()))
						scale = vram.Keep(vram.Ones(vram.Shape{out}, w.DType(), w.Device()))
						return
					}
					wf := w.Cast(ct)
					// w·0 sums to 0 when every element is finite and to
					// NaN as soon as one is NaN or Inf; a sum of |w|
					// would also overflow for large finite weights.
					if s := wf.MulScalar(0).Sum().Item(); s != 0 {
						bad = quantErr(vram.ErrArgument, "weight %v holds NaN or Inf values", w.Shape())
						return
					}
					amax := wf.Abs().MaxKeepDim(1)
					// The stored scale, at least minScale so that a row of
					// tiny values does not round to a scale of 0 (and from
					// there to all zeros); rows of zeros get 1.
					s := amax.DivScalar(qmax).Cast(w.DType()).Cast(ct).Clamp(minScale(w.DType()), math.Inf(1))
					s = vram.Where(amax.EqScalar(0), vram.OnesLike(s), s)
					wq = vram.Keep(wf.Div(s).Round().Clamp(-qmax, qmax).Cast(vram.Int8))
					scale = vram.Keep(s.Reshape(out).Cast(w.DType()))
				})
			})
		})
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		if wq != nil {
			wq.Release()
		}
		if scale != nil {
			scale.Release()
		}
		return nil, nil, err
	}
	return wq, scale, nil
}

// minScale returns the smallest positive value of dtype dt: the scale of a
// nonzero row whose max|w|/127 rounds to 0 in dt.
func minScale(dt vram.DType) float64 {
	switch dt {
	case vram.Float16:
		return 0x1p-24
	case vram.BFloat16:
		return 0x1p-133
	case vram.Float64:
		return math.SmallestNonzeroFloat64
	}
	return math.SmallestNonzeroFloat32
}

// QuantizeLinear quantizes l in place ([Weight], then
// [nn.Linear.SetInt8Weight]): its weight becomes int8 with per-channel
// scales and the float weight is released. It returns an error matching
// vram.ErrArgument, changing nothing, for a nil layer or one without a
// weight (made without [nn.NewLinear]), a layer already quantized, one
// with a pruning mask, or a weight with NaN or Inf values (and one matching
// vram.ErrReleased for a released weight or bias). It sees l alone: for
// a weight or bias that other layers share, quantize the model with
// [Quantize] or [QuantizeSelected], which check the sharing.
func QuantizeLinear(l *nn.Linear) error {
	if l == nil {
		return quantErr(vram.ErrArgument, "nil layer")
	}
	if err := quantizable(l, ""); err != nil {
		return err
	}
	wq, scale, err := Weight(l.Weight)
	if err != nil {
		return err
	}
	if err := l.SetInt8Weight(wq, scale); err != nil {
		wq.Release()
		scale.Release()
		return err
	}
	return nil
}

// quantizable checks what SetInt8Weight checks before any work is done;
// where, when not empty, names the layer in the error ("layer 1: ").
func quantizable(l *nn.Linear, where string) error {
	switch {
	case l.Weight == nil:
		return quantErr(vram.ErrArgument, "%sthe layer has no weight; make it with nn.NewLinear", where)
	case l.Weight.Released():
		return quantErr(vram.ErrReleased, "%sthe weight was released", where)
	case l.Bias != nil && l.Bias.Released():
		return quantErr(vram.ErrReleased, "%sthe bias was released", where)
	case l.Scale != nil || !l.Weight.DType().IsFloat():
		return quantErr(vram.ErrArgument, "%sthe layer is already quantized (weight %s)", where, l.Weight.DType())
	case l.WeightMask != nil || l.BiasMask != nil:
		return quantErr(vram.ErrArgument, "%sthe layer has a pruning mask; make the pruning permanent (prune.Remove) before quantizing", where)
	}
	return nil
}

// Quantize quantizes, in place, every [nn.Linear] of m and its sub-modules
// (m itself included), and returns how many. See [QuantizeSelected].
func Quantize(m nn.Module) (int, error) {
	return QuantizeSelected(m, func(string, *nn.Linear) bool { return true })
}

// QuantizeSelected quantizes, in place, each [nn.Linear] of m and its
// sub-modules (named as by [nn.NamedModules]: "" for m itself, "0",
// "encoder.fc") for which keep returns true, and returns how many. Layers
// already quantized are passed over. Every layer is checked and its int8
// values computed before any layer changes, so that an error (a pruning
// mask, NaN or Inf values, a weight or bias tensor that another layer or
// parameter not being quantized also holds) leaves the whole model as it
// was. Layers that share one weight tensor get one shared int8 weight and
// scale.
func QuantizeSelected(m nn.Module, keep func(name string, l *nn.Linear) bool) (int, error) {
	if m == nil || isNilPointer(m) {
		return 0, quantErr(vram.ErrArgument, "nil module")
	}
	if keep == nil {
		return 0, quantErr(vram.ErrArgument, "nil keep function; Quantize selects every layer")
	}
	type job struct {
		name string
		l    *nn.Linear
	}
	var jobs []job
	users := map[*vram.Tensor][]string{} // every holder of each parameter tensor
	for _, nm := range nn.NamedModules(m) {
		for _, p := range nm.Module.NamedParameters() {
			if !strings.Contains(p.Name, ".") {
				users[p.Tensor] = append(users[p.Tensor], join(nm.Name, p.Name))
			}
		}
		l, ok := nm.Module.(*nn.Linear)
		if !ok || l.Scale != nil || !keep(nm.Name, l) {
			continue
		}
		if err := quantizable(l, label(nm.Name)+": "); err != nil {
			return 0, err
		}
		jobs = append(jobs, job{nm.Name, l})
	}
	// A weight tensor held elsewhere than by the layers being quantized
	// would be left pointing at released memory, and a bias held
	// elsewhere would silently stop being trained there.
	mine := map[string]bool{}
	for _, j := range jobs {
		mine[join(j.name, "weight")] = true
		mine[join(j.name, "bias")] = true
	}
	for _, j := range jobs {
		for _, p := range []struct {
			what string
			t    *vram.Tensor
		}{{"weight", j.l.Weight}, {"bias", j.l.Bias}} {
			if p.t == nil {
				continue
			}
			for _, u := range users[p.t] {
				if !mine[u] {
					return 0, quantErr(vram.ErrArgument, "%s: the %s is also the parameter %q, which is not being quantized; untie them or leave this layer out", label(j.name), p.what, u)
				}
			}
		}
	}
	type result struct{ wq, scale *vram.Tensor }
	done := map[*vram.Tensor]result{}
	release := func() {
		for _, r := range done {
			r.wq.Release()
			r.scale.Release()
		}
	}
	for _, j := range jobs {
		if _, ok := done[j.l.Weight]; ok {
			continue
		}
		wq, scale, err := Weight(j.l.Weight)
		if err != nil {
			release()
			return 0, fmt.Errorf("%w (%s)", err, label(j.name))
		}
		done[j.l.Weight] = result{wq, scale}
	}
	for _, j := range jobs {
		r := done[j.l.Weight]
		if err := j.l.SetInt8Weight(r.wq, r.scale); err != nil {
			// Checked above; a failure here is a bug.
			panic("quant: internal: " + err.Error())
		}
	}
	return len(jobs), nil
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func label(name string) string {
	if name == "" {
		return "the model"
	}
	return "layer " + name
}

// isNilPointer reports whether m holds a nil pointer (a "var m
// *nn.Sequential" left unset), which is refused as a nil module is.
func isNilPointer(m nn.Module) bool {
	v := reflect.ValueOf(m)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
