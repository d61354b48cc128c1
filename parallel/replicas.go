package parallel

import (
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// Helpers shared by DataParallel and Pipeline: running work on a goroutine
// per device with the caller's settings, splitting a batch, and handing
// tensors made on those goroutines back to the caller.

// worker describes one goroutine's work for onDevices.
type worker struct {
	dev vram.Device
	fn  func()
}

// onDevices runs every worker's fn on a goroutine of its own and waits for
// all of them. Each goroutine gets the caller's gradient mode, inference
// mode, autocast dtype (as PyTorch's DataParallel carries autocast into
// its threads) and current stream of its device (goroutine-scoped
// settings are not inherited otherwise), runs fn inside a vram.Tidy (fn keeps what it hands
// back with vram.Keep), then waits for its device's current stream, so
// that the time it took is the device's time. It returns each worker's
// duration. A panic in a worker is re-raised on the caller's goroutine
// once all have finished, the lowest-numbered first, naming the worker
// with label(i) (see rethrow); so is a worker whose goroutine ended before
// fn returned (runtime.Goexit, which testing's FailNow calls), as
// [errGoexit], rather than leave its share of the work undone unnoticed.
func onDevices(op string, label func(i int) string, ws []worker) []time.Duration {
	grad, inference := vram.GradEnabled(), vram.InferenceModeEnabled()
	cast, casting := vram.AutocastDType()
	streams := make([]*vram.Stream, len(ws))
	for i, w := range ws {
		streams[i] = vram.CurrentStream(w.dev)
	}
	took := make([]time.Duration, len(ws))
	panics := make([]any, len(ws))
	stacks := make([][]byte, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			finished := false
			defer func() {
				if p := recover(); p != nil {
					panics[i], stacks[i] = p, debug.Stack()
				} else if !finished {
					panics[i] = errGoexit
				}
			}()
			start := time.Now()
			body := func() {
				vram.Tidy(w.fn)
				if err := streams[i].Synchronize(); err != nil {
					panic(&vram.Error{Op: op, Kind: vram.ErrBackend, Detail: "waiting for " + w.dev.String(), Err: err})
				}
			}
			if casting {
				withSettings(grad, inference, streams[i], func() { vram.Autocast(cast, body) })
			} else {
				withSettings(grad, inference, streams[i], body)
			}
			took[i] = time.Since(start)
			finished = true
		}()
	}
	wg.Wait()
	for i, p := range panics {
		if p != nil {
			rethrow(op, label(i), p, stacks[i])
		}
	}
	return took
}

// errGoexit is the failure of a worker whose goroutine ended before its
// work returned, without a panic: a misuse, of kind vram.ErrArgument.
var errGoexit = &vram.Error{Op: "worker", Kind: vram.ErrArgument,
	Detail: "the goroutine exited before its work returned (runtime.Goexit, which testing's FailNow and SkipNow call, cannot end a goroutine of this package's workers; panic instead)"}

// withSettings runs fn with the given gradient and inference modes and
// current stream on the calling goroutine.
func withSettings(grad, inference bool, s *vram.Stream, fn func()) {
	run := fn
	if !s.IsDefault() {
		run = func() { vram.WithStream(s, fn) }
	}
	switch {
	case inference:
		vram.InferenceMode(run)
	case !grad:
		vram.NoGrad(run)
	default:
		run()
	}
}

// rethrow re-raises on the caller's goroutine a panic p of the worker
// named who: vram's typed errors as an *vram.Error of the same kind that
// names the worker (so that vram.Catch, errors.Is and errors.As see it),
// other errors wrapped with the worker's name, anything else with the
// worker's stack appended, since its own stack is lost.
func rethrow(op, who string, p any, stack []byte) {
	switch e := p.(type) {
	case *vram.Error:
		panic(&vram.Error{Op: op, Kind: e.Kind, Detail: who, Err: e})
	case *vram.DeviceMismatchError:
		panic(&vram.Error{Op: op, Kind: vram.ErrDevice, Detail: who, Err: e})
	case error:
		panic(errorf("parallel: %s: %s: %w\n\n%s", op, who, e, stack))
	default:
		panic(fmt.Sprintf("parallel: %s: %s: %v\n\n%s", op, who, p, stack))
	}
}

// splitSizes returns n split into parts sizes as even as possible, the
// larger ones first (10 into 3: 4, 3, 3). Parts beyond n are 0.
func splitSizes(n, parts int) []int {
	out := make([]int, parts)
	for i := range out {
		out[i] = n / parts
		if i < n%parts {
			out[i]++
		}
	}
	return out
}

// chunkSizes returns n split into parts as torch.chunk splits it, and so
// PyTorch's DataParallel scatters a batch: parts of ceil(n/parts), the
// last one smaller, and 0 for the parts left over (10 into 3: 4, 4, 2; 6
// into 4: 2, 2, 2, 0).
func chunkSizes(n, parts int) []int {
	size := (n + parts - 1) / parts
	out := make([]int, parts)
	for i := range out {
		out[i] = max(0, min(size, n-i*size))
	}
	return out
}

// chunk returns rows [off, off+n) of x along dim on device d: a copy when
// d is another device, else a view. Gradients flow back to x.
func chunk(x *vram.Tensor, dim, off, n int, d vram.Device) *vram.Tensor {
	v := x.Narrow(dim, off, n)
	defer v.Release()
	return v.To(d)
}

// moduleOutput returns out, the output of m.Forward(in), as a tensor the
// caller may release: out itself when m computed it, a new handle of it
// (through which gradients flow) when it is in or one of m's parameters
// or buffers, which releasing out would otherwise release. It panics with
// an [*vram.Error] of kind vram.ErrArgument when out is nil.
func moduleOutput(op string, out, in *vram.Tensor, m nn.Module) *vram.Tensor {
	if out == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "the module's Forward returned nil; it must return its output tensor"})
	}
	owned := func(np nn.NamedParameter) bool { return np.Tensor == out }
	if out == in || slices.ContainsFunc(m.NamedParameters(), owned) || slices.ContainsFunc(nn.NamedBuffers(m), owned) {
		return out.To(out.Device())
	}
	return out
}

// adopt returns a new reference to t, made on the calling goroutine so that
// the caller's vram.Tidy owns it, and releases t (kept by a worker).
func adopt(t *vram.Tensor) *vram.Tensor {
	if t == nil {
		return nil
	}
	h := t.To(t.Device())
	t.Release()
	return h
}

// resolveDim returns dim counted from the end when negative, checked
// against a tensor of rank dims.
func resolveDim(op string, dim, dims int) int {
	if dims == 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: "cannot split a 0-dimensional tensor into batches; give a tensor with a batch dimension"})
	}
	d := dim
	if d < 0 {
		d += dims
	}
	if d < 0 || d >= dims {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("batch dimension %d is out of range for a tensor of %d dimensions", dim, dims)})
	}
	return d
}

// distinctDevices returns an error unless devs is a non-empty list of
// available, distinct devices.
func distinctDevices(op string, devs []vram.Device) error {
	if len(devs) == 0 {
		return errorf("parallel: %s: no devices given: %w", op, vram.ErrArgument)
	}
	for i, d := range devs {
		if err := d.Check(); err != nil {
			return errorf("parallel: %s: device %d, %v: %w", op, i, d, err)
		}
		if j := slices.Index(devs[:i], d); j >= 0 {
			return errorf("parallel: %s: %v is given twice (devices %d and %d); give each replica its own device: %w", op, d, j, i, vram.ErrArgument)
		}
	}
	return nil
}
