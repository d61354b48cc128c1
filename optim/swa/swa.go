// Package swa averages the weights of a model over training, as
// torch.optim.swa_utils does: [AveragedModel] keeps a copy of a model
// whose parameters hold the running average of the model's (stochastic
// weight averaging, the default) or an exponential moving average
// ([EMA]); [UpdateBN] recomputes the batch-normalization statistics of
// the averaged model from the data. The rate schedule that goes with it,
// SWALR, is [optim.NewSWALR].
//
//	avg, err := swa.NewAveragedModel(model, swa.Options{})
//	sched, err := optim.NewSWALR(opt, []float64{0.05}, 10, false)
//	for epoch := range epochs {
//		... train an epoch ...
//		if epoch >= swaStart {
//			avg.UpdateParameters(model)
//			sched.Step()
//		}
//	}
//	swa.UpdateBN(loader.All(), avg)
//
// Models are not safe for concurrent use, and neither is an
// AveragedModel.
package swa

import (
	"fmt"
	"iter"
	"reflect"
	"slices"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
	"github.com/vramgo/vram/nn"
)

// AvgFunc returns the new average of one tensor from its average so far,
// the model's current value (on the average's device) and the number of
// updates averaged so far, at least 1 (PyTorch's avg_fn). The result is a
// new tensor, which the caller copies into the average and releases.
type AvgFunc func(averaged, current *vram.Tensor, numAveraged int64) *vram.Tensor

// MultiAvgFunc updates the averages of tensors in place from the model's
// current values, each list of one device and dtype, with the number of
// updates averaged so far, at least 1 (PyTorch's multi_avg_fn).
type MultiAvgFunc func(averaged, current []*vram.Tensor, numAveraged int64)

// Options are the settings of [NewAveragedModel]. The zero value is
// PyTorch's default: an equal average of every update (SWA) of the
// parameters, on the model's device, the buffers copied from the model.
type Options struct {
	// Device holds the averaged model; the zero Device means the device
	// of the model's parameters.
	Device vram.Device
	// AvgFunc computes each average (avg_fn), when MultiAvgFunc is nil.
	AvgFunc AvgFunc
	// MultiAvgFunc computes the averages in place (multi_avg_fn), such as
	// [EMA]; it takes precedence over AvgFunc.
	MultiAvgFunc MultiAvgFunc
	// UseBuffers averages the buffers (batch-normalization statistics)
	// with the parameters (use_buffers=True) rather than copying them
	// from the model at each update.
	UseBuffers bool
}

// AveragedModel is a copy of a model whose parameters hold an average of
// the model's over the updates given to it
// (torch.optim.swa_utils.AveragedModel). It is an [nn.Module]: its
// Forward is that of the copy, its parameters are the copy's, named
// "module.<name>", and its buffers are the copy's and "n_averaged", the
// int64 count of updates, so that nn.Save and nn.Load keep it with
// PyTorch's state-dict names. Release it with [nn.Release].
type AveragedModel struct {
	nn.Base
	module    nn.Module
	nAveraged *vram.Tensor // int64 scalar on the copy's device
	opts      Options
}

var _ nn.Module = (*AveragedModel)(nil)

// NewAveragedModel returns an AveragedModel of a copy of model (made by
// [nn.Replicate], so any module built on nn.Base copies) on o.Device,
// with no update averaged yet: its parameters are model's until the first
// UpdateParameters. It returns an error for a nil model, a model without
// parameters whose device cannot be told, one whose parameters are on
// several devices and no o.Device, and the errors of nn.Replicate.
func NewAveragedModel(model nn.Module, o Options) (*AveragedModel, error) {
	if isNil(model) {
		return nil, fmt.Errorf("swa: averaged model: nil model: %w", vram.ErrArgument)
	}
	d := o.Device
	if d == (vram.Device{}) {
		ps := append(model.Parameters(), bufferTensors(model)...)
		if len(ps) == 0 {
			return nil, fmt.Errorf("swa: averaged model: %T has no parameters or buffers to place the copy by; set Options.Device: %w", model, vram.ErrArgument)
		}
		d = ps[0].Device()
		for _, p := range ps[1:] {
			if p.Device() != d {
				return nil, fmt.Errorf("swa: averaged model: %T has tensors on %v and %v; set Options.Device: %w", model, d, p.Device(), vram.ErrArgument)
			}
		}
	}
	cp, err := nn.Replicate(model, d)
	if err != nil {
		return nil, fmt.Errorf("swa: averaged model: %w", err)
	}
	a := &AveragedModel{module: cp, opts: o}
	a.RegisterModule("module", cp)
	a.nAveraged = vram.Zeros(vram.Shape{}, vram.Int64, d)
	a.RegisterBuffer("n_averaged", a.nAveraged)
	return a, nil
}

// Forward runs the averaged copy of the model on x.
func (a *AveragedModel) Forward(x *vram.Tensor) *vram.Tensor { return a.module.Forward(x) }

// Module returns the averaged copy of the model (PyTorch's .module).
func (a *AveragedModel) Module() nn.Module { return a.module }

// NumAveraged returns the number of updates averaged so far
// (n_averaged).
func (a *AveragedModel) NumAveraged() int64 { return int64(a.nAveraged.Item()) }

// bufferTensors returns the tensors of m's buffers.
func bufferTensors(m nn.Module) []*vram.Tensor {
	var out []*vram.Tensor
	for _, b := range nn.NamedBuffers(m) {
		out = append(out, b.Tensor)
	}
	return out
}

// UpdateParameters averages model's parameters (and with UseBuffers its
// buffers) into the averaged copy (update_parameters): the first update
// copies them, later ones apply the average function, the default being
// the equal average avg + (current - avg)/(n + 1). Without UseBuffers
// the copy's buffers are set to model's. Tensors that are not
// floating-point (num_batches_tracked) are copied, not averaged. model
// is only read; its tensors may be on other devices than the copy and of
// other dtypes (a model converted by Half after the copy was made): their
// values are converted to the copy's dtype, which the averages keep.
//
// It returns an error of kind vram.ErrArgument, changing nothing, for a
// nil model or one whose parameters (or buffers) do not match the copy's
// in number and shapes, or an n_averaged (loaded with nn.Load) that is
// negative or above 2^53, and of kind vram.ErrReleased for a released
// tensor in either; an average function that panics with a vram error
// gives that error, the averages then perhaps partly updated.
func (a *AveragedModel) UpdateParameters(model nn.Module) error {
	if isNil(model) {
		return fmt.Errorf("swa: update parameters: nil model: %w", vram.ErrArgument)
	}
	mine, theirs := a.module.Parameters(), model.Parameters()
	if err := match("parameter", mine, theirs); err != nil {
		return err
	}
	myBufs, theirBufs := bufferTensors(a.module), bufferTensors(model)
	if err := match("buffer", myBufs, theirBufs); err != nil {
		return err
	}
	if a.opts.UseBuffers {
		mine, theirs = append(mine, myBufs...), append(theirs, theirBufs...)
		myBufs, theirBufs = nil, nil
	}
	// n_averaged comes from a state dict when the model was loaded: a
	// count no run of updates gives would average with a weight
	// 1/(n+1) that is infinite or negative.
	var v float64
	if err := vram.Catch(func() { v = a.nAveraged.Item() }); err != nil {
		return fmt.Errorf("swa: update parameters: n_averaged: %w", err)
	}
	if !(v >= 0 && v <= 1<<53) {
		return fmt.Errorf("swa: update parameters: n_averaged is %v, not a count of updates from 0 to 2^53: %w", v, vram.ErrArgument)
	}
	n := int64(v)
	return vram.Catch(func() {
		vram.NoGrad(func() {
			vram.Tidy(func() { a.update(mine, theirs, myBufs, theirBufs, n) })
		})
	})
}

// update averages theirs into mine and copies theirBufs into myBufs.
func (a *AveragedModel) update(mine, theirs, myBufs, theirBufs []*vram.Tensor, n int64) {
	type key struct {
		d  vram.Device
		dt vram.DType
	}
	groups := map[key][2][]*vram.Tensor{}
	var order []key
	for i, p := range mine {
		cur := theirs[i].To(p.Device())
		if cur.DType() != p.DType() {
			cur = cur.Cast(p.DType())
		}
		if n == 0 || !p.DType().IsFloat() {
			p.CopyFrom(cur)
			continue
		}
		if a.opts.MultiAvgFunc == nil && a.opts.AvgFunc != nil {
			p.CopyFrom(a.opts.AvgFunc(p, cur, n))
			continue
		}
		k := key{p.Device(), p.DType()}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		g := groups[k]
		groups[k] = [2][]*vram.Tensor{append(g[0], p), append(g[1], cur)}
	}
	avg := a.opts.MultiAvgFunc
	if avg == nil {
		avg = swaAverage
	}
	for _, k := range order {
		avg(groups[k][0], groups[k][1], n)
	}
	for i, b := range myBufs {
		b.CopyFrom(theirBufs[i].To(b.Device()))
	}
	a.nAveraged.AddScalarInPlace(1)
}

// swaAverage is the equal average: avg moves 1/(n+1) of the way to cur.
func swaAverage(averaged, current []*vram.Tensor, n int64) {
	for i, p := range averaged {
		p.CopyFrom(p.LerpScalar(current[i], 1/float64(n+1)))
	}
}

// EMA returns the exponential moving average of weight decay for
// [Options.MultiAvgFunc] (PyTorch's get_ema_multi_avg_fn): each update
// moves the average 1 - decay of the way to the model's value. It
// panics with an *vram.Error of kind vram.ErrArgument for a decay
// outside [0, 1].
func EMA(decay float64) MultiAvgFunc {
	if !(decay >= 0 && decay <= 1) {
		panic(&vram.Error{Op: "swa_ema", Kind: vram.ErrArgument, Detail: fmt.Sprintf("decay %v, want a value in [0, 1]", decay)})
	}
	return func(averaged, current []*vram.Tensor, _ int64) {
		for i, p := range averaged {
			p.CopyFrom(p.LerpScalar(current[i], 1-decay))
		}
	}
}

// match returns an error unless a and b hold live tensors of the same
// shapes, pairwise.
func match(what string, a, b []*vram.Tensor) error {
	if len(a) != len(b) {
		return fmt.Errorf("swa: update parameters: the model has %d %ss, the averaged copy %d: %w", len(b), what, len(a), vram.ErrArgument)
	}
	for i := range a {
		switch {
		case a[i].Released() || b[i].Released():
			return fmt.Errorf("swa: update parameters: %s %d was released: %w", what, i, vram.ErrReleased)
		case !slices.Equal(a[i].Shape(), b[i].Shape()):
			return fmt.Errorf("swa: update parameters: %s %d has shape %v in the model, %v in the averaged copy: %w",
				what, i, b[i].Shape(), a[i].Shape(), vram.ErrArgument)
		}
	}
	return nil
}

// UpdateBN recomputes the running statistics of every batch-normalization
// layer of model (nn.BatchNorm1d and nn.BatchNorm2d, and modules
// embedding them) from the batches of loader (a [data.Loader]'s All, which
// releases each batch after use), as
// torch.optim.swa_utils.update_bn does: the statistics are reset, each
// layer averages every batch alike for the pass (momentum=None), and its
// momentum setting and model's training mode are restored afterwards. The
// model is run in training mode on the first tensor of each batch, moved
// to the device of model's first parameter, without recording gradients.
// A model without such layers is left alone and loader not read. It
// returns the first error of loader, or of the forward passes (a vram
// error they panic with), the statistics then partly updated; a nil
// loader or model is an error of kind vram.ErrArgument, changing nothing.
func UpdateBN(loader iter.Seq2[*data.Batch, error], model nn.Module) error {
	switch {
	case isNil(model):
		return fmt.Errorf("swa: update bn: nil model: %w", vram.ErrArgument)
	case loader == nil:
		return fmt.Errorf("swa: update bn: nil loader: %w", vram.ErrArgument)
	}
	var bns []*nn.BatchNorm2d
	for _, m := range nn.Modules(model) {
		switch l := m.(type) {
		case *nn.BatchNorm2d:
			bns = append(bns, l)
		case *nn.BatchNorm1d:
			bns = append(bns, &l.BatchNorm2d)
		}
	}
	var withStats []*nn.BatchNorm2d
	for _, l := range bns {
		if l.RunningMean != nil {
			withStats = append(withStats, l)
		}
	}
	if len(withStats) == 0 {
		return nil
	}
	type saved struct {
		momentum   float64
		cumulative bool
	}
	was := make([]saved, len(withStats))
	vram.NoGrad(func() {
		for i, l := range withStats {
			was[i] = saved{l.Momentum, l.CumulativeAverage}
			l.RunningMean.FillInPlace(0)
			l.RunningVar.FillInPlace(1)
			if l.NumBatchesTracked != nil {
				l.NumBatchesTracked.FillInPlace(0)
			}
			l.CumulativeAverage = true
		}
	})
	training := model.Training()
	model.Train()
	defer func() {
		for i, l := range withStats {
			l.Momentum, l.CumulativeAverage = was[i].momentum, was[i].cumulative
		}
		if !training {
			model.Eval()
		}
	}()
	var dev vram.Device
	if ps := model.Parameters(); len(ps) > 0 {
		dev = ps[0].Device()
	}
	for b, err := range loader {
		if err != nil {
			return fmt.Errorf("swa: update bn: %w", err)
		}
		if b == nil || len(b.Tensors) == 0 {
			return fmt.Errorf("swa: update bn: a batch without tensors: %w", vram.ErrArgument)
		}
		err := vram.Catch(func() {
			vram.NoGrad(func() {
				vram.Tidy(func() {
					x := b.Tensors[0]
					if dev != (vram.Device{}) {
						x = x.To(dev)
					}
					model.Forward(x)
				})
			})
		})
		if err != nil {
			return fmt.Errorf("swa: update bn: %w", err)
		}
	}
	return nil
}

// isNil reports whether model is nil or holds a nil pointer (a "var m
// *nn.Sequential" left unset), which this package refuses alike.
func isNil(model nn.Module) bool {
	if model == nil {
		return true
	}
	v := reflect.ValueOf(model)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
