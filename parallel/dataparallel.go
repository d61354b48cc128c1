package parallel

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// DataParallelModule runs one module on several devices of this process,
// one goroutine per device (torch.nn.DataParallel, without a GIL in the
// way): a batch is split along its batch dimension, each replica computes
// its part on its own device, and the outputs are gathered on one device,
// or each replica computes its part of the loss too
// ([DataParallelModule.ForwardLoss]), so that no device does the others'
// work.
//
// The replicas are made once, by [NewDataParallel], and stay identical:
// the wrapper optimizer ([DataParallelModule.Optimizer]) sums the
// replicas' gradients with a collective and then steps every replica with
// the same update, so no forward copies the parameters again, except
// those of the module written outside the optimizer (a checkpoint loaded
// into it), which the next forward copies to the other replicas, as
// PyTorch's replication at each forward would. Replica 0 is
// the module itself, on the first device, so after training it holds the
// trained parameters. Buffers (BatchNorm's running statistics) are the
// module's: every forward copies them to the other replicas first, as
// PyTorch's replication at each forward does, so the module's statistics
// come from the first device's share of each batch and an evaluation
// treats every row alike. So are the modes of its sub-modules and the
// requires-grad flags of its parameters: every forward gives them to the
// other replicas, so that freezing a layer, or putting a BatchNorm in
// evaluation mode, on the module alone acts on every replica.
//
// A DataParallelModule is an [nn.Module]: its parameters are replica 0's,
// named "module."+name like PyTorch's DataParallel. It is used by one
// goroutine at a time.
type DataParallelModule struct {
	replicas []nn.Module
	params   [][]*vram.Tensor // per replica, in the module's order
	// versions holds each parameter's version (per replica, as params)
	// when the replicas were last known equal; see syncParams.
	versions [][]uint64
	devs     []vram.Device
	comms    []Communicator
	comm     string // which collectives, for the report
	out      vram.Device
	dim      int
	bucket   int64
	closed   bool
	// summed is set once SyncGradients has summed the gradients of the
	// current step, and cleared by the next forward, backward or ZeroGrad.
	summed bool
	// copies is set once SyncGradients has summed the gradients, so that
	// the replicas other than the module hold copies of the module's; it
	// is cleared by the wrapper optimizer's ZeroGrad, and by unshare.
	copies bool

	rep dpTimes
}

// dpTimes are the report's cumulative timings.
type dpTimes struct {
	forward, backward, reduce, step []time.Duration
	gather                          time.Duration
	forwards, backwards, steps      int
}

// DataParallelOption configures [NewDataParallel].
type DataParallelOption func(*dpConfig)

type dpConfig struct {
	out    vram.Device
	outSet bool
	dim    int
	comms  []Communicator
	bucket int64
}

// OutputDevice makes Forward gather the outputs on d (by default, the
// first device). d may be any device, the CPU included.
func OutputDevice(d vram.Device) DataParallelOption {
	return func(c *dpConfig) { c.out, c.outSet = d, true }
}

// ScatterDim makes dim the batch dimension along which inputs (and the
// targets of ForwardLoss) are split and outputs gathered; by default 0.
// A negative dim counts from the end.
func ScatterDim(dim int) DataParallelOption {
	return func(c *dpConfig) { c.dim = dim }
}

// WithCommunicators makes the replicas sum their gradients with comms,
// rank i for device i, instead of a group that NewDataParallel makes (NCCL
// for CUDA devices where it can be used, [NewLocalGroup] otherwise).
func WithCommunicators(comms []Communicator) DataParallelOption {
	return func(c *dpConfig) { c.comms = comms }
}

// GradientBucketBytes sets how many bytes of gradients are summed in one
// collective (25 MiB by default, as PyTorch's DDP): gradients of one dtype
// are concatenated into buckets of about this size, which costs a copy but
// fewer collectives. 0 reduces each gradient on its own.
func GradientBucketBytes(n int64) DataParallelOption {
	return func(c *dpConfig) { c.bucket = n }
}

const dpBucketBytes = 25 << 20

// ncclGroup makes NCCL communicators for CUDA devices, one per device,
// when the NCCL bindings are built in; it is nil otherwise.
var ncclGroup func(devs []vram.Device) ([]Communicator, error)

// newGroup returns communicators for devs and says which they are: NCCL
// when every device is a CUDA device and NCCL can be used, the in-process
// collectives otherwise (with NCCL's error, when it failed).
func newGroup(devs []vram.Device) ([]Communicator, string, error) {
	note := ""
	if ncclGroup != nil && !slices.ContainsFunc(devs, func(d vram.Device) bool { return !d.IsCUDA() }) {
		comms, err := ncclGroup(devs)
		if err == nil {
			return comms, "nccl", nil
		}
		note = fmt.Sprintf(" (NCCL: %v)", err)
	}
	comms, err := NewLocalGroup(devs)
	return comms, "in-process" + note, err
}

// DataParallel is [NewDataParallel] on CUDA devices given by index, the
// spelling of PyTorch's nn.DataParallel(model, device_ids=[0, 1, 2]):
//
//	net, err := parallel.DataParallel(myNet, []int{0, 1, 2})
//
// An empty list means every CUDA device of the machine.
func DataParallel(m nn.Module, deviceIDs []int, opts ...DataParallelOption) (*DataParallelModule, error) {
	if len(deviceIDs) == 0 {
		for i := range vram.DeviceCount() {
			deviceIDs = append(deviceIDs, i)
		}
		if len(deviceIDs) == 0 {
			return nil, errorf("parallel: data parallel: no CUDA device; give the devices with NewDataParallel (sim devices or the CPU run without a GPU): %w", vram.ErrUnavailable)
		}
	}
	devs := make([]vram.Device, len(deviceIDs))
	for i, id := range deviceIDs {
		devs[i] = vram.CUDA(id)
	}
	return NewDataParallel(m, devs, opts...)
}

// NewDataParallel returns m replicated on devices, which must be distinct
// and available (CUDA, sim or the CPU, mixed if need be). m itself is
// replica 0: its parameters are moved to devices[0] first when they are
// elsewhere (as PyTorch requires the module on device_ids[0]); the others
// are made with [nn.Replicate]. The module's parameters must not be
// replaced afterwards (their values may change: the next Forward or
// ForwardLoss copies those written outside the optimizer, for instance by
// loading a checkpoint into m, to the other replicas, and SyncParameters
// does so at once; so may their requires-grad flags, which every
// forward gives to the replicas). Nor must they move: Forward,
// ForwardLoss, SyncGradients, SyncParameters and the optimizer's Step
// refuse a module (or replica) with a parameter, gradient or buffer off
// its device with an error of kind vram.ErrDevice, before they change
// anything, so that moving it back mends it.
func NewDataParallel(m nn.Module, devices []vram.Device, opts ...DataParallelOption) (*DataParallelModule, error) {
	if isNilModule(m) {
		return nil, errorf("parallel: data parallel: nil module: %w", vram.ErrArgument)
	}
	if err := distinctDevices("data parallel", devices); err != nil {
		return nil, err
	}
	cfg := dpConfig{bucket: dpBucketBytes}
	for _, o := range opts {
		if o == nil {
			return nil, errorf("parallel: data parallel: nil option: %w", vram.ErrArgument)
		}
		o(&cfg)
	}
	if !cfg.outSet {
		cfg.out = devices[0]
	}
	if err := cfg.out.Check(); err != nil {
		return nil, errorf("parallel: data parallel: output device %v: %w", cfg.out, err)
	}
	if cfg.bucket < 0 {
		return nil, errorf("parallel: data parallel: negative gradient bucket size %d: %w", cfg.bucket, vram.ErrArgument)
	}
	if cfg.comms != nil {
		if err := checkReplicaComms(cfg.comms, devices); err != nil {
			return nil, err
		}
	}
	if err := vram.Catch(func() { m.To(devices[0]) }); err != nil {
		return nil, errorf("parallel: data parallel: moving the module to %v: %w", devices[0], err)
	}
	dp := &DataParallelModule{devs: slices.Clone(devices), out: cfg.out, dim: cfg.dim, bucket: cfg.bucket}
	dp.replicas = []nn.Module{m}
	for _, d := range devices[1:] {
		r, err := nn.Replicate(m, d)
		if err != nil {
			dp.releaseReplicas()
			return nil, errorf("parallel: data parallel: %w", err)
		}
		dp.replicas = append(dp.replicas, r)
	}
	for _, r := range dp.replicas {
		dp.params = append(dp.params, r.Parameters())
	}
	dp.recordVersions()
	if cfg.comms != nil {
		dp.comms, dp.comm = cfg.comms, "given"
	} else {
		comms, kind, err := newGroup(devices)
		if err != nil {
			dp.releaseReplicas()
			return nil, errorf("parallel: data parallel: %w", err)
		}
		dp.comms, dp.comm = comms, kind
	}
	n := len(devices)
	dp.rep = dpTimes{forward: make([]time.Duration, n), backward: make([]time.Duration, n),
		reduce: make([]time.Duration, n), step: make([]time.Duration, n)}
	return dp, nil
}

func checkReplicaComms(comms []Communicator, devs []vram.Device) error {
	if len(comms) != len(devs) {
		return errorf("parallel: data parallel: %d communicators for %d devices: %w", len(comms), len(devs), vram.ErrArgument)
	}
	for i, c := range comms {
		switch {
		case c == nil:
			return errorf("parallel: data parallel: communicator %d is nil: %w", i, vram.ErrArgument)
		case c.Rank() != i || c.Size() != len(devs):
			return errorf("parallel: data parallel: communicator %d is rank %d of %d, want rank %d of %d: %w", i, c.Rank(), c.Size(), i, len(devs), vram.ErrArgument)
		case c.Device() != devs[i]:
			return errorf("parallel: data parallel: communicator %d is on %v, device %d is %v: %w", i, c.Device(), i, devs[i], vram.ErrDevice)
		}
	}
	return nil
}

// releaseReplicas releases every replica but the module itself.
func (dp *DataParallelModule) releaseReplicas() {
	for _, r := range dp.replicas[1:] {
		nn.Release(r)
	}
	dp.replicas = dp.replicas[:1]
}

// Devices returns the replicas' devices, replica i on device i.
func (dp *DataParallelModule) Devices() []vram.Device { return slices.Clone(dp.devs) }

// Replicas returns the replicas, the module itself first.
func (dp *DataParallelModule) Replicas() []nn.Module { return slices.Clone(dp.replicas) }

// Module returns the module given to NewDataParallel (replica 0), as
// PyTorch's DataParallel.module.
func (dp *DataParallelModule) Module() nn.Module { return dp.replicas[0] }

func (dp *DataParallelModule) live(op string) {
	if dp.closed {
		panic(&vram.Error{Op: op, Kind: vram.ErrReleased, Detail: "the DataParallelModule was released"})
	}
}

// shares returns the batch dimension of x and how many of its rows each
// replica takes.
func (dp *DataParallelModule) shares(op string, x *vram.Tensor) (int, []int) {
	if x == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "nil input"})
	}
	dim := resolveDim(op, dp.dim, x.Dim())
	n := x.Size(dim)
	if n == 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("the batch (dimension %d of %v) is empty", dim, x.Shape())})
	}
	return dim, chunkSizes(n, len(dp.devs))
}

// checkPlaced returns an error of kind vram.ErrDevice when a parameter
// or buffer of a replica is no longer on the replica's device (the module
// moved with To after NewDataParallel, or a replica from Replicas), or a
// parameter's gradient is not (moved on its own), and of
// kind vram.ErrReleased when one was released. Forward, ForwardLoss and
// the collectives check first, before they change anything: a collective
// would fail on such a tensor only after the others had begun, and abort
// the communicators for good, where moving the module back mends this.
func (dp *DataParallelModule) checkPlaced(op string) *vram.Error {
	for r, rep := range dp.replicas {
		for _, list := range [][]nn.NamedParameter{rep.NamedParameters(), nn.NamedBuffers(rep)} {
			for _, p := range list {
				what := fmt.Sprintf("%s's %s", dp.label(r), p.Name)
				if r == 0 {
					what = fmt.Sprintf("the module's %s (replica 0)", p.Name)
				}
				switch t := p.Tensor; {
				case t == nil || t.Released():
					return &vram.Error{Op: op, Kind: vram.ErrReleased, Detail: what + " was released; the replicas need every parameter and buffer"}
				case t.Device() != dp.devs[r]:
					return &vram.Error{Op: op, Kind: vram.ErrDevice, Detail: fmt.Sprintf(
						"%s is on %v; the replicas stay on %v, so move it back (To(%v)), or make a new DataParallel on the devices you want",
						what, t.Device(), dp.devs, dp.devs[r])}
				}
				if g := p.Tensor.Grad(); g != nil && g.Device() != dp.devs[r] {
					return &vram.Error{Op: op, Kind: vram.ErrDevice, Detail: fmt.Sprintf(
						"the gradient of %s is on %v, the replica on %v; move the gradient back", what, g.Device(), dp.devs[r])}
				}
			}
		}
	}
	return nil
}

// label names replica r for errors.
func (dp *DataParallelModule) label(r int) string {
	return fmt.Sprintf("replica %d on %v", r, dp.devs[r])
}

// onReplicas runs fn(r) for each replica r that has rows (sizes[r] > 0,
// or every replica when sizes is nil), each on its own goroutine, and
// adds the times to acc.
func (dp *DataParallelModule) onReplicas(op string, sizes []int, acc []time.Duration, fn func(r int)) {
	var ranks []int
	var ws []worker
	for r, d := range dp.devs {
		if sizes != nil && sizes[r] == 0 {
			continue
		}
		ranks = append(ranks, r)
		ws = append(ws, worker{dev: d, fn: func() { fn(r) }})
	}
	took := onDevices(op, func(i int) string { return dp.label(ranks[i]) }, ws)
	for i, r := range ranks {
		acc[r] += took[i]
	}
}

// Forward splits x along the batch dimension into one part per device as
// PyTorch's DataParallel does, with torch.chunk: parts of ceil(n/devices)
// rows, the last one smaller, so that a module whose output depends on
// the other rows of its part (BatchNorm in training) sees PyTorch's parts
// (10 rows on 3 devices are 4, 4 and 2; 6 rows on 4 devices are 2, 2, 2
// and nothing: a device left without rows runs nothing). It runs each
// replica on its part on its own goroutine, and returns the outputs concatenated on
// the output device, in order. x may be on any device. Gradients flow back
// through the gather to each replica's parameters (and to x); the
// optimizer then sums them. Outputs with no dimensions (a loss computed
// inside the module, the usual fix for an overloaded first GPU) are
// stacked into a vector, one element per replica that ran, with a
// warning ([vram.WarnOnce]), as PyTorch's gather does. With one device,
// Forward returns the module's output as it is (on the output device), a
// scalar staying a scalar, as PyTorch's DataParallel then calls the
// module directly.
//
// The module's Forward runs on several goroutines at once, one per
// replica, each with the caller's gradient mode and current streams. It
// may return its input or one of its parameters or buffers as they are
// (the gather takes a new handle of it); a replica whose Forward returns
// nil fails with an error of kind vram.ErrArgument. A panic in a replica is re-raised here as an [*vram.Error] that names the
// replica and wraps the original (vram.Catch returns it).
func (dp *DataParallelModule) Forward(x *vram.Tensor) *vram.Tensor {
	const op = "data parallel forward"
	dp.live(op)
	dim, sizes := dp.shares(op, x)
	if err := dp.checkPlaced(op); err != nil {
		panic(err)
	}
	dp.syncParams(op)
	dp.syncBuffers(op)
	dp.syncModes()
	dp.syncRequiresGrad()
	dp.unshare()
	offs := offsets(sizes)
	outs := make([]*vram.Tensor, len(dp.devs))
	var moved []*vram.Tensor
	// Released also when a replica fails: the others' outputs then
	// reach no one.
	defer func() {
		for _, t := range outs {
			if t != nil {
				t.Release()
			}
		}
		for _, t := range moved {
			t.Release()
		}
	}()
	dp.onReplicas(op, sizes, dp.rep.forward, func(r int) {
		in := chunk(x, dim, offs[r], sizes[r], dp.devs[r])
		defer in.Release()
		m := dp.replicas[r]
		outs[r] = vram.Keep(moduleOutput(op, m.Forward(in), in, m))
	})
	dp.rep.forwards++
	start := time.Now()
	defer func() { dp.rep.gather += time.Since(start) }()
	scalar := false
	for r, o := range outs {
		if o == nil {
			continue
		}
		if o.Dim() == 0 {
			scalar = true
		} else if scalar {
			panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("replica %d returned shape %v where others returned scalars", r, o.Shape())})
		}
		moved = append(moved, o.To(dp.out))
	}
	if len(dp.devs) == 1 {
		return moved[0].To(dp.out)
	}
	if scalar {
		vram.WarnOnce(fmt.Sprintf("data parallel: the %d replicas that ran all returned scalars; they are gathered into a vector of one element per replica (of shape [%d])", len(moved), len(moved)))
		return vram.Stack(moved, 0)
	}
	if len(moved) == 1 {
		return moved[0].To(dp.out)
	}
	return vram.Cat(moved, resolveDim(op, dp.dim, moved[0].Dim()))
}

// recordVersions notes the version of every replica's parameters, which
// are equal now.
func (dp *DataParallelModule) recordVersions() {
	dp.versions = make([][]uint64, len(dp.params))
	for r, ps := range dp.params {
		dp.versions[r] = make([]uint64, len(ps))
		for i, p := range ps {
			dp.versions[r][i] = p.Version()
		}
	}
}

// syncParams copies to the other replicas each parameter of the module
// (replica 0) written since the replicas were last known equal in a way
// that theirs were not: a checkpoint loaded into the module, a value set
// by hand. PyTorch's DataParallel replicates the module at each forward,
// so that its replicas always compute with the module's parameters; here
// the replicas stay, and without this copy they would compute their
// shares of the gradient, and step, from the old values for ever. A
// parameter written as often on every replica (by the optimizer's Step,
// or by optimizers of one's own stepping every replica) is taken to be
// equal, and not copied. It panics with an [*vram.Error] of kind
// vram.ErrShape when a replica's parameter no longer matches the
// module's.
func (dp *DataParallelModule) syncParams(op string) {
	changed := false
	vram.NoGrad(func() {
		for i, src := range dp.params[0] {
			moved := src.Version() - dp.versions[0][i]
			for r := 1; r < len(dp.params); r++ {
				p := dp.params[r][i]
				if p == src || p.Version()-dp.versions[r][i] == moved {
					continue
				}
				if !slices.Equal(p.Shape(), src.Shape()) || p.DType() != src.DType() {
					panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("%s's parameter %d is %v %v, the module's %v %v",
						dp.label(r), i, p.Shape(), p.DType(), src.Shape(), src.DType())})
				}
				v := src.To(p.Device())
				p.CopyFrom(v)
				v.Release()
				changed = true
			}
		}
	})
	if changed {
		dp.recordVersions()
	}
}

// syncBuffers copies the module's buffers (replica 0's, such as
// BatchNorm's running statistics) to every other replica, as PyTorch's
// DataParallel does by replicating the module at each forward: every row
// of an evaluation then sees the module's statistics, whichever replica
// computes it, and the module's buffers are those of one device's share of
// each training batch, as in PyTorch. It panics with an [*vram.Error] of
// kind vram.ErrShape when a replica's buffers no longer match the
// module's.
func (dp *DataParallelModule) syncBuffers(op string) {
	src := nn.NamedBuffers(dp.replicas[0])
	if len(src) == 0 {
		return
	}
	vram.NoGrad(func() {
		for r, rep := range dp.replicas[1:] {
			dst := nn.NamedBuffers(rep)
			if len(dst) != len(src) {
				panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("%s has %d buffers, the module %d", dp.label(r+1), len(dst), len(src))})
			}
			for i, b := range src {
				d := dst[i].Tensor
				if d == b.Tensor {
					continue // shared with the module
				}
				if !slices.Equal(d.Shape(), b.Tensor.Shape()) || d.DType() != b.Tensor.DType() {
					panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("%s's buffer %s is %v %v, the module's %v %v",
						dp.label(r+1), dst[i].Name, d.Shape(), d.DType(), b.Tensor.Shape(), b.Tensor.DType())})
				}
				v := b.Tensor.To(d.Device())
				d.CopyFrom(v)
				v.Release()
			}
		}
	})
}

// syncModes gives every replica's sub-modules the training or evaluation
// mode of the module's, as PyTorch's replication at each forward does: a
// part of the module put in evaluation mode on its own (model.bn.Eval(),
// to keep a fine-tuned network's BatchNorm statistics), or the module
// itself rather than the DataParallelModule, runs in that mode on every
// replica, not on the first device's share alone. The modules are matched
// in the order of nn.NamedModules, parents before their children, so
// that a parent's Train or Eval, which reaches its children, is mended
// by theirs.
func (dp *DataParallelModule) syncModes() {
	src := nn.NamedModules(dp.replicas[0])
	for _, rep := range dp.replicas[1:] {
		dst := nn.NamedModules(rep)
		if len(dst) != len(src) {
			continue // not the module's structure: nothing to match
		}
		for i, m := range src {
			switch d := dst[i].Module; {
			case d.Training() == m.Module.Training():
			case m.Module.Training():
				d.Train()
			default:
				d.Eval()
			}
		}
	}
}

// syncRequiresGrad gives every replica's parameters the module's
// requires-grad flags, as PyTorch's replication at each forward does: a
// layer frozen (or unfrozen) on the module after NewDataParallel is then
// frozen on every replica, rather than trained through the others'
// gradients (or summed from the module's share alone).
func (dp *DataParallelModule) syncRequiresGrad() {
	for _, ps := range dp.params[1:] {
		for i, p := range ps {
			if want := dp.params[0][i].RequiresGrad(); p.RequiresGrad() != want {
				p.SetRequiresGrad(want)
			}
		}
	}
}

// unshare starts the gradients of a new backward: once SyncGradients has
// summed them, every replica holds the sum, and a backward that adds to
// them without a ZeroGrad in between (gradient accumulation across
// steps, or a SyncGradients before the last backward) would count the
// sum once per replica at the next SyncGradients. As in PyTorch, where
// the replicas are made afresh at each forward and only the module keeps
// gradients, the module (replica 0) keeps the sum and the other replicas
// drop their copies, so that the next sum adds the new gradients to it
// once.
func (dp *DataParallelModule) unshare() {
	dp.summed = false
	if !dp.copies {
		return
	}
	for _, ps := range dp.params[1:] {
		for i, p := range ps {
			if p != dp.params[0][i] {
				p.SetGrad(nil)
			}
		}
	}
	dp.copies = false
}

func offsets(sizes []int) []int {
	out := make([]int, len(sizes))
	for i := 1; i < len(sizes); i++ {
		out[i] = out[i-1] + sizes[i-1]
	}
	return out
}

// ForwardLoss splits x and its targets y along the batch dimension as
// Forward does, and computes on each replica's device, on its goroutine,
// the replica's output and lossFn(output, targets): the loss never leaves
// the devices, so no device gathers the others' outputs (the usual fix
// for an overloaded first GPU). lossFn must return a scalar that is a mean
// over the batch, as [nn.MSELoss] and [nn.CrossEntropyLoss] do; each
// replica's loss is weighted by its share of the rows, so that the
// [Loss]'s value and gradients are those of the whole batch on one device,
// uneven splits included. y may be on any device; its batch dimension must
// have x's size.
//
// Panics are re-raised as for Forward.
func (dp *DataParallelModule) ForwardLoss(x, y *vram.Tensor, lossFn func(output, target *vram.Tensor) *vram.Tensor) *Loss {
	const op = "data parallel forward loss"
	dp.live(op)
	if y == nil || lossFn == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "nil targets or loss function"})
	}
	dim, sizes := dp.shares(op, x)
	ydim := resolveDim(op, dp.dim, y.Dim())
	if y.Size(ydim) != x.Size(dim) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("inputs %v and targets %v differ in the batch dimension %d", x.Shape(), y.Shape(), dim)})
	}
	if err := dp.checkPlaced(op); err != nil {
		panic(err)
	}
	dp.syncParams(op)
	dp.syncBuffers(op)
	dp.syncModes()
	dp.syncRequiresGrad()
	dp.unshare()
	total := float64(x.Size(dim))
	offs := offsets(sizes)
	parts := make([]*vram.Tensor, len(dp.devs))
	ok := false
	defer func() {
		if !ok { // a replica failed: the others' parts reach no one
			for _, p := range parts {
				p.Release() // nil-safe
			}
		}
	}()
	dp.onReplicas(op, sizes, dp.rep.forward, func(r int) {
		in := chunk(x, dim, offs[r], sizes[r], dp.devs[r])
		defer in.Release()
		tgt := chunk(y, ydim, offs[r], sizes[r], dp.devs[r])
		defer tgt.Release()
		m := dp.replicas[r]
		out := moduleOutput(op, m.Forward(in), in, m)
		defer out.Release()
		l := lossFn(out, tgt)
		defer l.Release()
		if l.NumElements() != 1 {
			panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("the loss function returned shape %v; it must return a scalar (a mean over the batch)", l.Shape())})
		}
		parts[r] = vram.Keep(l.Reshape().MulScalar(float64(sizes[r]) / total))
	})
	ok = true
	dp.rep.forwards++
	for r := range parts {
		parts[r] = adopt(parts[r])
	}
	return &Loss{dp: dp, parts: parts}
}

// Loss is the loss of a batch computed by [DataParallelModule.ForwardLoss]:
// one part on each replica's device, each the replica's loss weighted by
// its share of the batch, so that their sum is the loss of the whole batch.
// Its tensors belong to the caller's vram.Tidy like any result.
type Loss struct {
	dp    *DataParallelModule
	parts []*vram.Tensor
}

// Parts returns each replica's weighted loss, on its device (nil for a
// replica that got no rows); their sum is the batch's loss.
func (l *Loss) Parts() []*vram.Tensor { return slices.Clone(l.parts) }

// Item returns the loss of the whole batch: the sum of the parts.
func (l *Loss) Item() float64 {
	s := 0.0
	for _, p := range l.parts {
		if p != nil {
			s += p.Item()
		}
	}
	return s
}

// Backward runs each replica's backward on its own goroutine, from its
// part of the loss: each replica's parameters get the gradient of its
// part, and the optimizer sums them. Panics are re-raised as for Forward.
func (l *Loss) Backward() {
	const op = "data parallel backward"
	l.dp.live(op)
	sizes := make([]int, len(l.parts))
	for r, p := range l.parts {
		if p != nil {
			sizes[r] = 1
		}
	}
	l.dp.unshare()
	l.dp.onReplicas(op, sizes, l.dp.rep.backward, func(r int) { l.parts[r].Backward() })
	l.dp.rep.backwards++
}

// Release releases the parts.
func (l *Loss) Release() {
	for _, p := range l.parts {
		if p != nil {
			p.Release()
		}
	}
}

// SyncGradients replaces every replica's gradients by their sum over the
// replicas, with the communicators: what each replica computed is its
// share of the batch's gradient, so after the sum every replica holds the
// gradient of the whole batch. A parameter with a gradient on some
// replicas gets zeros on the others first; one with a gradient on none is
// left alone. The wrapper optimizer's Step calls it; call it yourself
// before reading the gradients (until then replica 0's, the module's, are
// only its share) or stepping optimizers of your own on each replica.
// The gradients are summed once per step: a call after the sum, before
// the next Forward, ForwardLoss, Loss.Backward or the wrapper optimizer's
// ZeroGrad, does nothing (so SyncGradients, then the wrapper's Step, sums
// once). Gradients that go on building up after a sum (another backward
// before ZeroGrad, or a step without ZeroGrad, as PyTorch allows) add to
// it as on one device: the next Forward, ForwardLoss or Loss.Backward
// leaves the sum on the module alone and drops the other replicas'
// copies, so that the next sum counts it once. A failed collective, or
// a replica's part that panics, aborts the group, so that no replica
// waits for ever, and is returned.
func (dp *DataParallelModule) SyncGradients() error {
	const op = "data parallel gradients"
	if dp.closed {
		return errorf("parallel: data parallel: SyncGradients after Release: %w", vram.ErrReleased)
	}
	if dp.summed {
		return nil
	}
	if err := dp.checkPlaced(op); err != nil {
		return err
	}
	n := len(dp.params[0])
	var idx []int // parameters with a gradient somewhere
	missing := make([][]int, len(dp.devs))
	for i := range n {
		some := false
		for r := range dp.devs {
			if dp.params[r][i].Grad() != nil {
				some = true
			}
		}
		if !some {
			continue
		}
		idx = append(idx, i)
		for r := range dp.devs {
			if dp.params[r][i].Grad() == nil {
				missing[r] = append(missing[r], i)
			}
		}
	}
	if len(idx) == 0 {
		dp.summed = true
		return nil
	}
	buckets := dp.buckets(idx)
	errs := make([]error, len(dp.devs))
	err := vram.Catch(func() {
		dp.onReplicas(op, nil, dp.rep.reduce, func(r int) {
			defer dp.abortOnPanic(r)
			for _, i := range missing[r] {
				p := dp.params[r][i]
				var z *vram.Tensor
				vram.NoGrad(func() { z = vram.Keep(p.NewZeros(p.Shape())) })
				p.SetGrad(z) // the parameter owns z now
			}
			for _, b := range buckets {
				if err := reduceBucket(dp.comms[r], dp.params[r], b); err != nil {
					errs[r] = errorf("parallel: %s: %s: %w", op, dp.label(r), err)
					dp.comms[r].Abort(err)
					return
				}
			}
		})
	})
	if err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	dp.summed = true
	dp.copies = len(dp.devs) > 1
	return nil
}

// ClipGradNorm sums the replicas' gradients (SyncGradients) and scales
// every replica's in place so that their combined L2 norm is at most
// maxNorm, as [optim.ClipGradNorm] does on one device, and returns the
// norm before clipping. It is the DataParallel spelling of PyTorch's
// clip_grad_norm_(model.parameters(), maxNorm), between the backward and
// the optimizer's Step: optim.ClipGradNorm on the module's parameters
// alone would clip replica 0's share of the gradient before the sum, and
// leave the other replicas unclipped. It returns SyncGradients' error, or
// one of kind vram.ErrArgument for a negative or NaN maxNorm.
func (dp *DataParallelModule) ClipGradNorm(maxNorm float64) (float64, error) {
	const op = "data parallel clip gradients"
	if !(maxNorm >= 0) {
		return 0, &vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("max norm must be non-negative, got %v", maxNorm)}
	}
	if err := dp.SyncGradients(); err != nil {
		return 0, err
	}
	norms := make([]float64, len(dp.devs))
	err := vram.Catch(func() {
		dp.onReplicas(op, nil, dp.rep.reduce, func(r int) { norms[r] = optim.ClipGradNorm(dp.params[r], maxNorm) })
	})
	return norms[0], err
}

// abortOnPanic, deferred by replica r's part of a collective step, aborts
// the communicators when that part panics, so that the other replicas,
// waiting for r in a collective, fail at once rather than at the timeout;
// the panic goes on.
func (dp *DataParallelModule) abortOnPanic(r int) {
	if p := recover(); p != nil {
		dp.comms[r].Abort(errorf("%s panicked: %v", dp.label(r), p))
		panic(p)
	}
}

// buckets groups the parameters idx (indices into the parameter lists),
// last first as their gradients are computed, into runs of one dtype of at
// most dp.bucket bytes (a parameter larger than that is a bucket alone).
func (dp *DataParallelModule) buckets(idx []int) [][]int {
	var out [][]int
	var cur []int
	var bytes int64
	var dt vram.DType
	for k := len(idx) - 1; k >= 0; k-- {
		p := dp.params[0][idx[k]]
		size := int64(p.NumElements()) * int64(p.DType().Size())
		if len(cur) > 0 && (p.DType() != dt || bytes+size > dp.bucket) {
			out = append(out, cur)
			cur, bytes = nil, 0
		}
		cur = append(cur, idx[k])
		bytes += size
		dt = p.DType()
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// reduceBucket sums the gradients of params[b...] over the ranks of c:
// in place for a single contiguous gradient, else through one flat
// buffer, copied back.
func reduceBucket(c Communicator, params []*vram.Tensor, b []int) error {
	if len(b) == 1 {
		if g := params[b[0]].Grad(); g.IsContiguous() {
			return c.AllReduce(g, Sum)
		}
	}
	flats := make([]*vram.Tensor, len(b))
	for k, i := range b {
		flats[k] = params[i].Grad().Reshape(-1)
	}
	var flat *vram.Tensor
	vram.NoGrad(func() { flat = vram.Cat(flats, 0) })
	if err := c.AllReduce(flat, Sum); err != nil {
		return err
	}
	off := 0
	for _, i := range b {
		g := params[i].Grad()
		n := g.NumElements()
		part := flat.Narrow(0, off, n).Reshape(g.Shape()...)
		vram.NoGrad(func() { g.CopyFrom(part) })
		off += n
	}
	return nil
}

// SyncParameters copies replica 0's parameters (the module's) to every
// other replica, with the communicators: after changing the module's
// parameters outside the optimizer, such as loading a checkpoint into it,
// for code that reads the replicas before the next Forward or
// ForwardLoss (which copy such parameters themselves).
func (dp *DataParallelModule) SyncParameters() error {
	const op = "data parallel parameters"
	if dp.closed {
		return errorf("parallel: data parallel: SyncParameters after Release: %w", vram.ErrReleased)
	}
	if err := dp.checkPlaced(op); err != nil {
		return err
	}
	errs := make([]error, len(dp.devs))
	err := vram.Catch(func() {
		dp.onReplicas(op, nil, dp.rep.reduce, func(r int) {
			defer dp.abortOnPanic(r)
			for _, p := range dp.params[r] {
				var err error
				vram.NoGrad(func() {
					if p.IsContiguous() {
						err = dp.comms[r].Broadcast(p, 0)
						return
					}
					c := p.Contiguous()
					defer c.Release()
					if err = dp.comms[r].Broadcast(c, 0); err == nil {
						p.CopyFrom(c)
					}
				})
				if err != nil {
					errs[r] = errorf("parallel: %s: %s: %w", op, dp.label(r), err)
					dp.comms[r].Abort(err)
					return
				}
			}
		})
	})
	if err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	dp.recordVersions()
	return nil
}

// Optimizer returns an optimizer that steps every replica: newOpt makes one
// optimizer per replica from the replica's parameters (the same kind and
// settings for all), and the returned one's Step sums the gradients
// ([DataParallelModule.SyncGradients]) and then steps each replica's
// optimizer on the replica's goroutine, so the replicas stay identical:
//
//	opt, err := net.Optimizer(func(ps []*vram.Tensor) (optim.Optimizer, error) {
//		return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1})
//	})
func (dp *DataParallelModule) Optimizer(newOpt func(params []*vram.Tensor) (optim.Optimizer, error)) (*ReplicaOptimizer, error) {
	if newOpt == nil {
		return nil, errorf("parallel: data parallel optimizer: nil constructor: %w", vram.ErrArgument)
	}
	o := &ReplicaOptimizer{dp: dp}
	for r, ps := range dp.params {
		opt, err := newOpt(ps)
		if err == nil && opt == nil {
			err = errorf("the constructor returned a nil optimizer: %w", vram.ErrArgument)
		}
		if err != nil {
			return nil, errorf("parallel: data parallel optimizer for %s: %w", dp.label(r), err)
		}
		o.opts = append(o.opts, opt)
	}
	return o, nil
}

// ReplicaOptimizer steps the optimizers of every replica of a
// [DataParallelModule] together; it is an [optim.GroupedOptimizer] with
// the parameter groups of the replicas' optimizers (one group when they
// are not grouped), so that an optim.Schedule drives every group of every
// replica from the group's own base rate.
type ReplicaOptimizer struct {
	dp   *DataParallelModule
	opts []optim.Optimizer
}

var _ optim.GroupedOptimizer = (*ReplicaOptimizer)(nil)

// Parameters returns the parameters of every replica, replica 0's first:
// those the optimizer updates. Give these, not the module's, to code that
// works on the gradients before Step across the replicas, such as
// amp.GradScaler's Unscale and Step (which then unscale and check every
// replica's share of the gradients; Step refuses a list that leaves some
// out, such as the module's Parameters, replica 0's alone):
//
//	scaler.Step(opt, opt.Parameters())
func (o *ReplicaOptimizer) Parameters() []*vram.Tensor {
	var out []*vram.Tensor
	for _, ps := range o.dp.params {
		out = append(out, ps...)
	}
	return out
}

// Optimizers returns the replicas' optimizers, replica i's at index i.
func (o *ReplicaOptimizer) Optimizers() []optim.Optimizer { return slices.Clone(o.opts) }

// Step sums the replicas' gradients (unless SyncGradients or
// ClipGradNorm has summed them since the last backward) and steps every
// replica's optimizer, each on its own goroutine. A failed collective
// panics with an [*vram.Error] of kind vram.ErrBackend that wraps it.
func (o *ReplicaOptimizer) Step() {
	const op = "data parallel step"
	o.dp.live(op)
	if err := o.dp.SyncGradients(); err != nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrBackend, Detail: "summing the replicas' gradients", Err: err})
	}
	o.dp.onReplicas(op, nil, o.dp.rep.step, func(r int) { o.opts[r].Step() })
	o.dp.rep.steps++
}

// ZeroGrad clears the gradients of every replica.
func (o *ReplicaOptimizer) ZeroGrad() {
	o.dp.summed = false
	o.dp.copies = false
	for _, opt := range o.opts {
		opt.ZeroGrad()
	}
}

// Release releases the state of every replica's optimizer that has a
// Release method (as optim.SGD and optim.Adam do: momentum and moment
// buffers on the replicas' devices).
func (o *ReplicaOptimizer) Release() {
	for _, opt := range o.opts {
		if r, ok := opt.(interface{ Release() }); ok {
			r.Release()
		}
	}
}

// LR returns the learning rate (replica 0's; they are all the same).
func (o *ReplicaOptimizer) LR() float64 { return o.opts[0].LR() }

// SetLR sets the learning rate of every replica's optimizer (of every
// parameter group).
func (o *ReplicaOptimizer) SetLR(lr float64) {
	for _, opt := range o.opts {
		opt.SetLR(lr)
	}
}

// NumGroups returns the number of parameter groups of the replicas'
// optimizers (replica 0's; they are all the same), 1 when they are not
// [optim.GroupedOptimizer]s.
func (o *ReplicaOptimizer) NumGroups() int {
	if g, ok := o.opts[0].(optim.GroupedOptimizer); ok {
		return g.NumGroups()
	}
	return 1
}

// GroupLR returns the learning rate of parameter group i (replica 0's).
// It panics with an *vram.Error of kind vram.ErrIndex when there is no
// group i.
func (o *ReplicaOptimizer) GroupLR(i int) float64 {
	if g, ok := o.opts[0].(optim.GroupedOptimizer); ok {
		return g.GroupLR(i)
	}
	o.checkGroup("group_lr", i)
	return o.opts[0].LR()
}

// SetGroupLR sets the learning rate of parameter group i of every
// replica's optimizer. It panics with an *vram.Error of kind
// vram.ErrIndex when there is no group i, and as the optimizers' SetLR
// does for a bad rate.
func (o *ReplicaOptimizer) SetGroupLR(i int, lr float64) {
	o.checkGroup("set_group_lr", i)
	for _, opt := range o.opts {
		if g, ok := opt.(optim.GroupedOptimizer); ok {
			g.SetGroupLR(i, lr)
		} else {
			opt.SetLR(lr)
		}
	}
}

// checkGroup panics with an *vram.Error of kind vram.ErrIndex unless the
// optimizers have a group i.
func (o *ReplicaOptimizer) checkGroup(op string, i int) {
	if n := o.NumGroups(); i < 0 || i >= n {
		panic(&vram.Error{Op: op, Kind: vram.ErrIndex, Detail: fmt.Sprintf("parameter group %d of %d", i, n)})
	}
}

// NamedParameters returns the module's parameters (replica 0's), named
// "module." + their names, as the keys of PyTorch's DataParallel.
func (dp *DataParallelModule) NamedParameters() []nn.NamedParameter {
	named := dp.replicas[0].NamedParameters()
	for i := range named {
		named[i].Name = "module." + named[i].Name
	}
	return named
}

// Parameters returns the module's parameters (replica 0's).
func (dp *DataParallelModule) Parameters() []*vram.Tensor { return dp.replicas[0].Parameters() }

// NamedBuffers returns the module's buffers (replica 0's), named "module."
// + their names like the parameters, so that [nn.StateDict] and [nn.Save]
// of the DataParallelModule keep them (BatchNorm's running statistics),
// as PyTorch's state_dict of a DataParallel does.
func (dp *DataParallelModule) NamedBuffers() []nn.NamedParameter {
	named := nn.NamedBuffers(dp.replicas[0])
	for i := range named {
		named[i].Name = "module." + named[i].Name
	}
	return named
}

// NamedChildren returns the module, named "module".
func (dp *DataParallelModule) NamedChildren() []nn.NamedModule {
	return []nn.NamedModule{{Name: "module", Module: dp.replicas[0]}}
}

// To does nothing when d is the first device, where the module already
// is (PyTorch's parallel_net.to(0)); the replicas cannot move elsewhere,
// and any other d panics with an [*vram.Error] of kind vram.ErrArgument.
func (dp *DataParallelModule) To(d vram.Device) {
	if d != dp.devs[0] {
		panic(&vram.Error{Op: "data parallel to", Kind: vram.ErrArgument, Detail: fmt.Sprintf(
			"the replicas stay on %v; moving the module to %v would part it from them: make a new DataParallel on the devices you want", dp.devs, d)})
	}
}

// CUDA is To(vram.CUDA(index...)).
func (dp *DataParallelModule) CUDA(index ...int) { dp.To(vram.CUDA(index...)) }

// CPU is To(vram.CPU).
func (dp *DataParallelModule) CPU() { dp.To(vram.CPU) }

// Train puts every replica in training mode.
func (dp *DataParallelModule) Train() {
	for _, r := range dp.replicas {
		r.Train()
	}
}

// Eval puts every replica in evaluation mode.
func (dp *DataParallelModule) Eval() {
	for _, r := range dp.replicas {
		r.Eval()
	}
}

// Training reports whether the replicas are in training mode.
func (dp *DataParallelModule) Training() bool { return dp.replicas[0].Training() }

// Release releases the replicas other than the module itself, and closes
// the communicators that NewDataParallel made. The DataParallelModule must
// not be used afterwards; the module stays usable.
func (dp *DataParallelModule) Release() error {
	if dp.closed {
		return nil
	}
	dp.closed = true
	dp.releaseReplicas()
	if dp.comm == "given" {
		return nil
	}
	var errs []error
	for _, c := range dp.comms {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// DataParallelReport is what [DataParallelModule.Report] returns: each
// device's memory and the time its replica spent in each phase since the
// module was made or the report reset.
type DataParallelReport struct {
	// Collectives says which communicators sum the gradients: "nccl",
	// "in-process" (with NCCL's error when it was tried and failed), or
	// "given" (WithCommunicators).
	Collectives string
	// Replicas has one entry per device, in order.
	Replicas []ReplicaReport
	// Gather is the time Forward spent gathering the outputs on Output.
	Gather time.Duration
	// Output is the device Forward gathers on.
	Output vram.Device
	// Forwards, Backwards and Steps count the calls of Forward and
	// ForwardLoss, of Loss.Backward, and of the optimizer's Step.
	Forwards, Backwards, Steps int
}

// ReplicaReport is one replica's part of a [DataParallelReport]. The
// times are wall-clock times of the replica's goroutine, each phase ending
// when its device has finished the work (its current stream synchronised).
type ReplicaReport struct {
	Rank   int
	Device vram.Device
	// Allocated and MaxAllocated are the device's live and peak bytes of
	// tensors (vram.MemoryAllocated and vram.MaxMemoryAllocated): the
	// whole device's, which is the replica's unless other work shares it.
	Allocated, MaxAllocated int64
	// Forward covers Forward and ForwardLoss (the replica's part of the
	// batch copied to its device, its forward and loss); Backward,
	// Loss.Backward; AllReduce, summing gradients (and SyncParameters);
	// Step, the replica's optimizer step.
	Forward, Backward, AllReduce, Step time.Duration
}

// Report returns the memory of each device and the time spent per phase.
func (dp *DataParallelModule) Report() DataParallelReport {
	r := DataParallelReport{Collectives: dp.comm, Gather: dp.rep.gather, Output: dp.out,
		Forwards: dp.rep.forwards, Backwards: dp.rep.backwards, Steps: dp.rep.steps}
	for i, d := range dp.devs {
		r.Replicas = append(r.Replicas, ReplicaReport{Rank: i, Device: d,
			Allocated: vram.MemoryAllocated(d), MaxAllocated: vram.MaxMemoryAllocated(d),
			Forward: dp.rep.forward[i], Backward: dp.rep.backward[i], AllReduce: dp.rep.reduce[i], Step: dp.rep.step[i]})
	}
	return r
}

// ResetReport sets the report's times and counts to zero (the devices'
// peaks are vram.ResetPeakMemoryStats's business).
func (dp *DataParallelModule) ResetReport() {
	n := len(dp.devs)
	dp.rep = dpTimes{forward: make([]time.Duration, n), backward: make([]time.Duration, n),
		reduce: make([]time.Duration, n), step: make([]time.Duration, n)}
}

// String formats the report as a table, one row per replica.
func (r DataParallelReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "data parallel on %d devices (collectives: %s): %d forwards, %d backwards, %d steps; gather on %v %v\n",
		len(r.Replicas), r.Collectives, r.Forwards, r.Backwards, r.Steps, r.Output, r.Gather.Round(time.Microsecond))
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "rank\tdevice\tallocated\tpeak\tforward\tbackward\tall-reduce\tstep\t")
	for _, x := range r.Replicas {
		fmt.Fprintf(w, "%d\t%v\t%s\t%s\t%v\t%v\t%v\t%v\t\n", x.Rank, x.Device, mib(x.Allocated), mib(x.MaxAllocated),
			x.Forward.Round(time.Microsecond), x.Backward.Round(time.Microsecond), x.AllReduce.Round(time.Microsecond), x.Step.Round(time.Microsecond))
	}
	w.Flush()
	return b.String()
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// isNilModule reports whether m is nil or holds a nil pointer (a "var m
// *nn.Sequential" left unset), which the constructors refuse alike.
func isNilModule(m nn.Module) bool {
	if m == nil {
		return true
	}
	v := reflect.ValueOf(m)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
