package optim

import (
	"math"
	"strconv"

	"github.com/vramgo/vram"
)

// LBFGSState is the state of an [LBFGS] optimizer, the entries of
// PyTorch's LBFGS state_dict() (its one parameter's state and the
// learning rate of its one group), for a checkpoint held in memory: Save
// and Load do not take LBFGS, whose state is not per parameter. Its
// tensors are flat vectors of as many elements as the parameters have in
// all, in their dtype and on their device.
type LBFGSState struct {
	LR        float64 // the learning rate (param_groups[0]["lr"])
	FuncEvals int     // closure evaluations over all Steps (func_evals)
	NIter     int     // iterations over all Steps (n_iter)
	// D is the last direction (d) and PrevFlatGrad the gradient it was
	// taken from (prev_flat_grad); both nil before the first iteration.
	D, PrevFlatGrad *vram.Tensor
	// OldDirs and OldStps are the corrections y and s kept (old_dirs,
	// old_stps), oldest first, and Ro 1/(y·s) of each (ro); at most
	// HistorySize of each.
	OldDirs, OldStps []*vram.Tensor
	Ro               []float64
	T                float64 // the last step length (t)
	HDiag            float64 // the Hessian's diagonal estimate (H_diag)
	PrevLoss         float64 // the loss of the last iteration (prev_loss)
}

// Release frees the state's tensors.
func (st *LBFGSState) Release() {
	st.D.Release()
	st.PrevFlatGrad.Release()
	for i := range st.OldDirs {
		st.OldDirs[i].Release()
	}
	for i := range st.OldStps {
		st.OldStps[i].Release()
	}
}

// State returns a copy of the optimizer's state, which a later
// [LBFGS.LoadState], of this optimizer or of another one of the same
// parameters' shapes, resumes from exactly. Its tensors are new and kept
// (no vram.Tidy releases them): the caller releases them, with
// [LBFGSState.Release].
func (l *LBFGS) State() LBFGSState {
	st := LBFGSState{
		LR: l.cfgs[0].LR, FuncEvals: l.funcEvals, NIter: l.nIter,
		D: keepClone(l.d), PrevFlatGrad: keepClone(l.prevFlatGrad),
		Ro: append([]float64(nil), l.ro...), T: l.t, HDiag: l.hDiag, PrevLoss: l.prevLoss,
	}
	for i := range l.oldDirs {
		st.OldDirs = append(st.OldDirs, keepClone(l.oldDirs[i]))
		st.OldStps = append(st.OldStps, keepClone(l.oldStps[i]))
	}
	return st
}

// keepClone returns a kept copy of t, or nil for nil.
func keepClone(t *vram.Tensor) *vram.Tensor {
	if t == nil {
		return nil
	}
	var c *vram.Tensor
	vram.NoGrad(func() { c = vram.Keep(t.Clone()) })
	return c
}

// LoadState replaces the optimizer's state with a copy of st, from
// [LBFGS.State] (st stays the caller's), releasing the state it had. It
// returns an error of kind vram.ErrArgument, changing nothing, for a
// learning rate that is negative, NaN or infinite, negative counts or
// counts above 2^53, a zero Tensor (made without a factory), history
// slices of different lengths or longer than HistorySize, an Ro
// or HDiag that is not positive and finite, or an NIter above 0 without D
// and PrevFlatGrad (or 0 with them or with a history); of kind
// vram.ErrShape for a tensor that is not a vector of the parameters'
// number of elements; of kind vram.ErrDType for one of another dtype; of
// kind vram.ErrReleased for a released one; and a
// *vram.DeviceMismatchError for one on another device.
func (l *LBFGS) LoadState(st LBFGSState) error {
	if err := l.checkState(st); err != nil {
		return err
	}
	l.Release()
	l.SetLR(st.LR)
	l.funcEvals, l.nIter = st.FuncEvals, st.NIter
	l.d, l.prevFlatGrad = keepClone(st.D), keepClone(st.PrevFlatGrad)
	for i := range st.OldDirs {
		l.oldDirs = append(l.oldDirs, keepClone(st.OldDirs[i]))
		l.oldStps = append(l.oldStps, keepClone(st.OldStps[i]))
	}
	l.ro = append([]float64(nil), st.Ro...)
	l.t, l.hDiag, l.prevLoss = st.T, st.HDiag, st.PrevLoss
	return nil
}

// checkState returns the error LoadState documents for st, or nil.
func (l *LBFGS) checkState(st LBFGSState) error {
	const op = "optim: LBFGS: load state"
	n := 0
	for _, p := range l.params {
		n += p.NumElements()
	}
	p0 := l.params[0]
	vector := func(name string, i int, t *vram.Tensor) error {
		if i >= 0 {
			name = name + "[" + strconv.Itoa(i) + "]"
		}
		switch {
		case t == nil:
			return errorf(vram.ErrArgument, "%s: %s is nil", op, name)
		case vram.Catch(func() { t.Released() }) != nil:
			return errorf(vram.ErrArgument, "%s: %s is a zero Tensor, made without a factory", op, name)
		case t.Released():
			return errorf(vram.ErrReleased, "%s: %s is released", op, name)
		case t.Device() != p0.Device():
			return &vram.DeviceMismatchError{Op: "lbfgs_load_state", Expected: p0.Device(), Got: t.Device()}
		case t.DType() != p0.DType():
			return errorf(vram.ErrDType, "%s: %s is %s, the parameters %s", op, name, t.DType(), p0.DType())
		case t.Dim() != 1 || t.NumElements() != n:
			return errorf(vram.ErrShape, "%s: %s has shape %v, want [%d], the parameters' elements", op, name, t.Shape(), n)
		}
		return nil
	}
	finitePos := func(v float64) bool { return v > 0 && !math.IsInf(v, 1) }
	switch {
	case !(st.LR >= 0) || math.IsInf(st.LR, 1):
		return errorf(vram.ErrArgument, "%s: learning rate %v must be finite and not negative", op, st.LR)
	case st.FuncEvals < 0 || st.NIter < 0:
		return errorf(vram.ErrArgument, "%s: negative count: func_evals %d, n_iter %d", op, st.FuncEvals, st.NIter)
	case st.FuncEvals > maxSteps || st.NIter > maxSteps:
		return errorf(vram.ErrArgument, "%s: count above 2^53: func_evals %d, n_iter %d", op, st.FuncEvals, st.NIter)
	case len(st.OldDirs) != len(st.OldStps) || len(st.OldDirs) != len(st.Ro):
		return errorf(vram.ErrArgument, "%s: old_dirs, old_stps and ro have %d, %d and %d entries; want one length", op, len(st.OldDirs), len(st.OldStps), len(st.Ro))
	case len(st.OldDirs) > l.cfgs[0].HistorySize:
		return errorf(vram.ErrArgument, "%s: %d corrections exceed the history size %d", op, len(st.OldDirs), l.cfgs[0].HistorySize)
	case st.NIter == 0 && (st.D != nil || st.PrevFlatGrad != nil || len(st.OldDirs) > 0):
		return errorf(vram.ErrArgument, "%s: n_iter 0 with a direction or a history", op)
	case st.NIter > 0 && !finitePos(st.HDiag):
		return errorf(vram.ErrArgument, "%s: H_diag %v must be positive and finite", op, st.HDiag)
	}
	for i, r := range st.Ro {
		if !finitePos(r) {
			return errorf(vram.ErrArgument, "%s: ro[%d] %v must be positive and finite", op, i, r)
		}
	}
	if st.NIter > 0 {
		if err := vector("d", -1, st.D); err != nil {
			return err
		}
		if err := vector("prev_flat_grad", -1, st.PrevFlatGrad); err != nil {
			return err
		}
	}
	for i := range st.OldDirs {
		if err := vector("old_dirs", i, st.OldDirs[i]); err != nil {
			return err
		}
		if err := vector("old_stps", i, st.OldStps[i]); err != nil {
			return err
		}
	}
	return nil
}
