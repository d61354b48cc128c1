package vram

// The ...Like factories follow torch.zeros_like and its siblings: the new
// tensor has the shape, dtype and device of t (never its data, gradient or
// graph), and options given after t override them as they do for the other
// factories: vram.ZerosLike(x, vram.Float64) keeps x's shape and device and
// changes the dtype; vram.OnesLike(x, vram.CPU) keeps the dtype. The result
// requires grad only with [WithGrad]. EmptyLike, FullLike, ZerosLike and
// OnesLike lay the result out as [Tensor.Clone] does (PyTorch's
// preserve_format: t's own strides when t is dense in some order of its
// dimensions); RandLike and RandnLike give a row-major result, so that a
// seeded generator gives the same values in the same places whatever t's
// layout.

// resolveLike is resolve with t's dtype and device as the defaults.
func resolveLike(op string, t *Tensor, opts []Option) options {
	t.live(op)
	o := options{dtype: t.dtype, device: t.Device(), deviceSet: true}
	for _, opt := range opts {
		if opt != nil {
			opt.applyOption(&o)
		}
	}
	return o
}

func fullLike(op string, t *Tensor, value float64, opts []Option) *Tensor {
	o := resolveLike(op, t, opts)
	checkValue(op, value, o.dtype)
	out := newTensorPreserving(op, mustDevice(op, o.device), o.dtype, t)
	out.fill(op, value)
	return finish(out, o)
}

// likeOptions turns resolved options back into factory options, for random.
func likeOptions(o options) []Option {
	opts := []Option{o.device, o.dtype}
	if o.requiresGrad {
		opts = append(opts, WithGrad())
	}
	if o.gen != nil {
		opts = append(opts, WithGenerator(o.gen))
	}
	return opts
}

// EmptyLike returns an uninitialized tensor with t's shape, dtype and device
// (torch.empty_like). Options override the dtype and device. Like every
// ...Like factory it panics with [ErrReleased] for a released t and with
// [ErrUnavailable] when the device cannot be used.
func EmptyLike(t *Tensor, opts ...Option) *Tensor {
	const op = "empty_like"
	o := resolveLike(op, t, opts)
	return finish(newTensorPreserving(op, mustDevice(op, o.device), o.dtype, t), o)
}

// FullLike returns a tensor of t's shape, dtype and device filled with
// value (torch.full_like). Options override the dtype and device. A value
// that overflows the dtype panics as in [Full].
func FullLike(t *Tensor, value float64, opts ...Option) *Tensor {
	return fullLike("full_like", t, value, opts)
}

// ZerosLike returns zeros with t's shape, dtype and device
// (torch.zeros_like). Options override the dtype and device.
func ZerosLike(t *Tensor, opts ...Option) *Tensor {
	return fullLike("zeros_like", t, 0, opts)
}

// OnesLike returns ones with t's shape, dtype and device (torch.ones_like).
// Options override the dtype and device.
func OnesLike(t *Tensor, opts ...Option) *Tensor {
	return fullLike("ones_like", t, 1, opts)
}

// RandLike returns uniform random values in [0, 1) with t's shape, dtype
// and device (torch.rand_like). Options override the dtype and device and
// may pass a [WithGenerator]. It panics with [ErrDType] when the resulting
// dtype is not a float (an integer t needs a float dtype option).
func RandLike(t *Tensor, opts ...Option) *Tensor {
	o := resolveLike("rand_like", t, opts)
	return random("rand_like", t.shape, false, likeOptions(o))
}

// RandnLike returns standard normal random values with t's shape, dtype
// and device (torch.randn_like); see [RandLike] for options and panics.
func RandnLike(t *Tensor, opts ...Option) *Tensor {
	o := resolveLike("randn_like", t, opts)
	return random("randn_like", t.shape, true, likeOptions(o))
}
