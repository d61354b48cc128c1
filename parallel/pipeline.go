package parallel

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// Schedule is the order in which a [Pipeline]'s stages run the forward and
// backward passes of the micro-batches.
type Schedule uint8

const (
	// GPipe runs every micro-batch's forward, then every backward: simple,
	// but each stage holds the activations of all micro-batches at once.
	GPipe Schedule = iota
	// OneFOneB (1F1B) starts the backward of a micro-batch as soon as the
	// last stage has its loss, and then alternates one forward and one
	// backward: the same bubble as GPipe, but stage s holds the activations
	// of at most S-s micro-batches (S stages), not all of them.
	OneFOneB
)

// String returns the schedule's name, such as "1F1B".
func (s Schedule) String() string {
	switch s {
	case GPipe:
		return "GPipe"
	case OneFOneB:
		return "1F1B"
	}
	return fmt.Sprintf("Schedule(%d)", uint8(s))
}

// Stage is one part of a [Pipeline]: a module and the device it runs on.
// The module's Forward returns a tensor it computed, or its input or one
// of its parameters or buffers as they are (the pipeline then hands on a
// new handle, so that the module keeps its tensor); one that returns nil
// fails the pass with an error of kind vram.ErrArgument.
type Stage struct {
	Module nn.Module
	Device vram.Device
}

// PipelineOption configures [NewPipeline].
type PipelineOption func(*pipeConfig)

type pipeConfig struct {
	micro int
	sched Schedule
}

// MicroBatches sets how many micro-batches a batch is split into (by
// default four per stage, which keeps the bubble near 20%). A batch of
// fewer rows is split into single rows.
func MicroBatches(n int) PipelineOption { return func(c *pipeConfig) { c.micro = n } }

// WithSchedule sets the schedule of [Pipeline.ForwardBackward] (GPipe by
// default).
func WithSchedule(s Schedule) PipelineOption { return func(c *pipeConfig) { c.sched = s } }

// Pipeline runs a model split into stages, each on its own device and its
// own goroutine, on micro-batches: while stage 1 computes micro-batch 0,
// stage 0 computes micro-batch 1, and so on, so that the devices of a
// model too large for one of them work at the same time, idle only in the
// pipeline's bubble at the start and end of each batch: a fraction
// (S-1)/(M+S-1) of the time with S stages of equal cost and M
// micro-batches.
//
// The activations pass from one stage to the next with To, and gradients
// flow back the same way. [Pipeline.ForwardBackward] is a training step's
// forward and backward under a [Schedule]; [Pipeline.Forward] makes
// Pipeline an [nn.Module] (its result's Backward runs on the caller's
// goroutine). Stages on distinct devices overlap; stages that share a
// device run on its current stream in turn.
//
// A Pipeline is used by one goroutine at a time.
type Pipeline struct {
	stages []Stage
	micro  int
	sched  Schedule
	last   PipelineReport
}

// NewPipeline returns a pipeline of stages, in order: each stage's output
// is the next one's input. Every stage's module is moved to its device
// (which may be shared by several stages). It returns an error for no
// stages, a nil module, an unavailable device, parameters or buffers
// shared by stages on different devices, fewer than one micro-batch or
// an unknown schedule.
func NewPipeline(stages []Stage, opts ...PipelineOption) (*Pipeline, error) {
	if len(stages) == 0 {
		return nil, errorf("parallel: pipeline: no stages: %w", vram.ErrArgument)
	}
	cfg := pipeConfig{micro: 4 * len(stages)}
	for _, o := range opts {
		if o == nil {
			return nil, errorf("parallel: pipeline: nil option: %w", vram.ErrArgument)
		}
		o(&cfg)
	}
	if cfg.micro < 1 {
		return nil, errorf("parallel: pipeline: %d micro-batches; give at least 1: %w", cfg.micro, vram.ErrArgument)
	}
	if cfg.sched > OneFOneB {
		return nil, errorf("parallel: pipeline: unknown schedule %v: %w", cfg.sched, vram.ErrArgument)
	}
	for i, s := range stages {
		if isNilModule(s.Module) {
			return nil, errorf("parallel: pipeline: stage %d has no module: %w", i, vram.ErrArgument)
		}
		if err := s.Device.Check(); err != nil {
			return nil, errorf("parallel: pipeline: stage %d: %w", i, err)
		}
	}
	if err := sharedAcrossDevices(stages); err != nil {
		return nil, err
	}
	for i, s := range stages {
		if err := vram.Catch(func() { s.Module.To(s.Device) }); err != nil {
			return nil, errorf("parallel: pipeline: moving stage %d to %v: %w", i, s.Device, err)
		}
	}
	return &Pipeline{stages: slices.Clone(stages), micro: cfg.micro, sched: cfg.sched}, nil
}

// sharedAcrossDevices returns an error of kind vram.ErrArgument when a
// parameter or buffer belongs to stages on different devices: moving one
// stage would take it from the other, which would then fail at its first
// micro-batch. Stages on one device may share them (tied weights).
func sharedAcrossDevices(stages []Stage) error {
	type owner struct {
		stage int
		name  string
	}
	seen := map[*vram.Tensor]owner{}
	for i, s := range stages {
		for _, np := range slices.Concat(s.Module.NamedParameters(), nn.NamedBuffers(s.Module)) {
			o, ok := seen[np.Tensor]
			if !ok {
				seen[np.Tensor] = owner{i, np.Name}
				continue
			}
			if d := stages[o.stage].Device; d != s.Device {
				return errorf("parallel: pipeline: %s of stage %d on %v is %s of stage %d on %v; "+
					"a tensor lives on one device, so stages that share parameters or buffers must share a device: %w",
					np.Name, i, s.Device, o.name, o.stage, d, vram.ErrArgument)
			}
		}
	}
	return nil
}

// Stages returns the stages.
func (p *Pipeline) Stages() []Stage { return slices.Clone(p.stages) }

// pipeOp is one step of a stage's schedule: the forward or backward pass
// of micro-batch mb.
type pipeOp struct {
	backward bool
	mb       int
}

// scheduleOps returns stage s's steps (of n stages) for m micro-batches.
func scheduleOps(sched Schedule, s, n, m int) []pipeOp {
	var ops []pipeOp
	f := func(j int) { ops = append(ops, pipeOp{mb: j}) }
	b := func(j int) { ops = append(ops, pipeOp{backward: true, mb: j}) }
	switch sched {
	case OneFOneB:
		warm := min(n-1-s, m)
		for j := range warm {
			f(j)
		}
		for i := range m - warm {
			f(warm + i)
			b(i)
		}
		for i := m - warm; i < m; i++ {
			b(i)
		}
	default:
		for j := range m {
			f(j)
		}
		for j := range m {
			b(j)
		}
	}
	return ops
}

// errStageStopped is what a stage panics with when another stage failed
// and it stops waiting; it is never reported.
var errStageStopped = errors.New("parallel: pipeline: stopped because another stage failed")

// pipeRun is the shared state of one pass through the pipeline.
type pipeRun struct {
	p        *Pipeline
	sizes    []int // rows per micro-batch
	offs     []int
	acts     []chan *vram.Tensor // acts[s]: stage s's outputs, on stage s+1's device
	grads    []chan *vram.Tensor // grads[s]: the gradients of stage s's outputs, on its device
	done     chan struct{}       // closed when a stage fails
	stopOnce sync.Once           // closes done
	failOnce sync.Once           // sets first
	first    int                 // the stage that failed first
	fails    []any
	stack    [][]byte
	start    time.Time
	times    [][]opTime // per stage
	held     []int      // per stage, most micro-batches held at once
}

type opTime struct {
	backward   bool
	start, end time.Duration // since the run's start
}

func (p *Pipeline) newRun(op string, x *vram.Tensor) *pipeRun {
	if x == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "nil input"})
	}
	resolveDim(op, 0, x.Dim())
	n := x.Size(0)
	if n == 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("the batch (dimension 0 of %v) is empty", x.Shape())})
	}
	sizes := splitSizes(n, min(p.micro, n))
	s := len(p.stages)
	r := &pipeRun{p: p, sizes: sizes, offs: offsets(sizes), done: make(chan struct{}), first: -1,
		fails: make([]any, s), stack: make([][]byte, s), times: make([][]opTime, s), held: make([]int, s)}
	for range s {
		r.acts = append(r.acts, make(chan *vram.Tensor, len(sizes)))
		r.grads = append(r.grads, make(chan *vram.Tensor, len(sizes)))
	}
	return r
}

// recv returns the next tensor of ch, or stops the stage when another
// failed.
func (r *pipeRun) recv(ch chan *vram.Tensor) *vram.Tensor {
	select {
	case t := <-ch:
		return t
	case <-r.done:
		panic(errStageStopped)
	}
}

// guard runs stage s's body, recording its failure (a panic, or the end
// of the goroutine before body returned) and stopping the others.
func (r *pipeRun) guard(s int, body func()) {
	finished := false
	defer func() {
		e := recover()
		if e == nil && !finished {
			e = errGoexit
		}
		if e != nil {
			if e != errStageStopped {
				r.fails[s], r.stack[s] = e, debug.Stack()
				r.failOnce.Do(func() { r.first = s })
			}
			r.stopOnce.Do(func() { close(r.done) })
		}
	}()
	body()
	finished = true
}

// run runs stage(s) on a goroutine per stage and re-raises the first
// failure; afterwards it releases what the channels still hold.
func (r *pipeRun) run(op string, stage func(s int)) {
	ws := make([]worker, len(r.p.stages))
	for s, st := range r.p.stages {
		ws[s] = worker{dev: st.Device, fn: func() { r.guard(s, func() { stage(s) }) }}
	}
	r.start = time.Now()
	onDevices(op, func(s int) string { return r.p.label(s) }, ws)
	for _, chs := range [][]chan *vram.Tensor{r.acts, r.grads} {
		for _, ch := range chs {
			close(ch)
			for t := range ch {
				t.Release()
			}
		}
	}
	if r.first >= 0 {
		rethrow(op, r.p.label(r.first), r.fails[r.first], r.stack[r.first])
	}
}

func (p *Pipeline) label(s int) string { return fmt.Sprintf("stage %d on %v", s, p.stages[s].Device) }

// handOff returns t on device d for the next stage, outside the graph: a
// copy (a clone when d is t's device), kept from the stage's Tidy.
func handOff(t *vram.Tensor, d vram.Device) *vram.Tensor {
	var out *vram.Tensor
	vram.NoGrad(func() {
		if t.Device() == d {
			out = t.Clone()
		} else {
			out = t.To(d)
		}
	})
	return vram.Keep(out)
}

// timed runs fn as one step of stage s and records its time, the step
// ending when the stage's device has finished it. Inside the caller's
// autocast region (which the stage's goroutine inherits) each step runs
// in a region of that dtype; the micro-batches' graphs share the stage's
// cast of each weight, each use recorded on its own, so that each
// micro-batch's backward reaches the weight.
func (r *pipeRun) timed(s int, backward bool, fn func()) {
	begin := time.Since(r.start)
	if dt, ok := vram.AutocastDType(); ok {
		step := fn
		fn = func() { vram.Autocast(dt, step) }
	}
	vram.Tidy(fn)
	if err := vram.CurrentStream(r.p.stages[s].Device).Synchronize(); err != nil {
		panic(&vram.Error{Op: "pipeline", Kind: vram.ErrBackend, Detail: "waiting for " + r.p.stages[s].Device.String(), Err: err})
	}
	r.times[s] = append(r.times[s], opTime{backward: backward, start: begin, end: time.Since(r.start)})
}

// ForwardBackward runs the forward and backward passes of a training step
// on the batch x with targets y (both split along dimension 0 into
// micro-batches; on any device) in the pipeline's schedule, and returns
// the batch's loss. Each stage runs on its own goroutine: it receives a
// micro-batch's activations from the previous stage, computes its output
// and hands it on; the last stage computes lossFn(output, targets), and the
// gradients travel back the same way, each stage running the backward of
// its own part. lossFn must return a scalar mean over its micro-batch
// ([nn.MSELoss], [nn.CrossEntropyLoss]); each micro-batch's loss is
// weighted by its share of the rows, so that the loss and the gradients
// accumulated in the stages' parameters are those of the whole batch
// through the whole model on one device. Call the optimizer next.
//
// As in the unsplit model, a stage whose output nothing later depends on
// (a later stage detached it, or it is not floating-point, such as
// indices for an embedding) gets no gradient, and its parameters none:
// their Grad stays nil.
//
// A stage that panics stops the others; the panic is re-raised here as an
// [*vram.Error] that names the stage (vram.Catch returns it). Called with
// gradients off (inside NoGrad or InferenceMode) it panics with an
// [*vram.Error] of kind vram.ErrAutograd. Report describes the run
// afterwards.
func (p *Pipeline) ForwardBackward(x, y *vram.Tensor, lossFn func(output, target *vram.Tensor) *vram.Tensor) float64 {
	const op = "pipeline forward backward"
	if y == nil || lossFn == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "nil targets or loss function"})
	}
	if !vram.GradEnabled() {
		panic(&vram.Error{Op: op, Kind: vram.ErrAutograd, Detail: "gradients are off on this goroutine (NoGrad or InferenceMode), " +
			"so the backward passes would compute nothing; call Forward for inference"})
	}
	r := p.newRun(op, x)
	resolveDim(op, 0, y.Dim())
	if y.Size(0) != x.Size(0) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("inputs %v and targets %v differ in the batch dimension 0", x.Shape(), y.Shape())})
	}
	total := float64(x.Size(0))
	m, n := len(r.sizes), len(p.stages)
	losses := make([]float64, m)
	r.run(op, func(s int) {
		dev := p.stages[s].Device
		ins := make([]*vram.Tensor, m)  // stage inputs that need a gradient
		outs := make([]*vram.Tensor, m) // outputs (the weighted loss on the last stage)
		defer func() {
			for _, t := range slices.Concat(ins, outs) {
				t.Release() // nil-safe; what a failure left
			}
		}()
		held := 0
		for _, o := range scheduleOps(p.sched, s, n, m) {
			j := o.mb
			if !o.backward {
				if s > 0 {
					ins[j] = r.recv(r.acts[s-1]) // waiting is not the stage's time
				}
				r.timed(s, false, func() {
					in := ins[j]
					if s == 0 {
						in = chunk(x, 0, r.offs[j], r.sizes[j], dev)
					} else if in.DType().IsFloat() {
						in.SetRequiresGrad(true) // others (indices) take no gradient
					}
					m := p.stages[s].Module
					out := moduleOutput(op, m.Forward(in), in, m)
					if s < n-1 {
						outs[j] = vram.Keep(out)
						r.acts[s] <- handOff(out, p.stages[s+1].Device)
						return
					}
					tgt := chunk(y, 0, r.offs[j], r.sizes[j], dev)
					l := lossFn(out, tgt)
					if l.NumElements() != 1 {
						panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("the loss function returned shape %v; it must return a scalar (a mean over the micro-batch)", l.Shape())})
					}
					outs[j] = vram.Keep(l.Reshape().MulScalar(float64(r.sizes[j]) / total))
					losses[j] = outs[j].Item()
				})
				held++
				r.held[s] = max(r.held[s], held)
				continue
			}
			var g *vram.Tensor
			if s < n-1 {
				g = r.recv(r.grads[s])
			}
			r.timed(s, true, func() {
				if s == n-1 {
					if outs[j].RequiresGrad() {
						outs[j].Backward()
					}
				} else {
					defer g.Release() // nil-safe
					// No gradient came back when nothing after this
					// stage depends on its output (a stage detached it,
					// or it is not floating-point): its parameters get
					// none either, as in the unsplit model.
					if g != nil && outs[j].RequiresGrad() {
						if d := outs[j].Device(); g.Device() != d {
							// The stage left its output on another device
							// than its own; the gradient goes there.
							vram.NoGrad(func() { g = g.To(d) }) // released by timed's Tidy
						}
						outs[j].Backward(vram.Gradient(g))
					}
				}
				outs[j].Release()
				outs[j] = nil
				if s > 0 {
					in := ins[j]
					var back *vram.Tensor // nil: no gradient
					if g := in.Grad(); g != nil {
						back = handOff(g, p.stages[s-1].Device)
					}
					r.grads[s-1] <- back
					in.Release()
					ins[j] = nil
				}
			})
			held--
		}
	})
	p.last = r.report(len(p.stages))
	loss := 0.0
	for _, l := range losses {
		loss += l
	}
	return loss
}

// Forward runs x through the stages in micro-batches, each stage on its own
// goroutine, and returns the output, the micro-batches' outputs
// concatenated on the last stage's device. The activations pass between
// stages with To, so the result's graph reaches every stage's parameters
// and its Backward (on the caller's goroutine, one micro-batch after
// another) trains them all; for a pipelined backward, use ForwardBackward.
func (p *Pipeline) Forward(x *vram.Tensor) *vram.Tensor {
	const op = "pipeline forward"
	r := p.newRun(op, x)
	m, n := len(r.sizes), len(p.stages)
	outs := make([]*vram.Tensor, m)
	ran := false
	defer func() {
		if !ran {
			// A stage failed: release the outputs of the micro-batches
			// that got through, which no one else will.
			for _, o := range outs {
				o.Release() // nil-safe
			}
		}
	}()
	r.run(op, func(s int) {
		dev := p.stages[s].Device
		held := 0
		for j := range m {
			var in *vram.Tensor
			if s > 0 {
				in = r.recv(r.acts[s-1]) // waiting is not the stage's time
			}
			r.timed(s, false, func() {
				if s == 0 {
					in = chunk(x, 0, r.offs[j], r.sizes[j], dev)
				}
				defer in.Release()
				m := p.stages[s].Module
				out := moduleOutput(op, m.Forward(in), in, m)
				defer out.Release()
				if s < n-1 {
					r.acts[s] <- vram.Keep(out.To(p.stages[s+1].Device))
				} else {
					outs[j] = vram.Keep(out.To(dev))
				}
			})
			if vram.GradEnabled() {
				held++ // the graph keeps the activations until the caller's Backward
			} else {
				held = 1
			}
			r.held[s] = max(r.held[s], held)
		}
	})
	ran = true
	p.last = r.report(n)
	for j := range outs {
		outs[j] = adopt(outs[j])
	}
	if len(outs) == 1 {
		return outs[0]
	}
	defer func() {
		for _, o := range outs {
			o.Release()
		}
	}()
	return vram.Cat(outs, 0)
}

// PipelineReport describes the last pass through a [Pipeline]: the bubble
// it expected and the one it measured, and each stage's time and memory.
type PipelineReport struct {
	Schedule     Schedule
	Stages       int
	MicroBatches int
	// ExpectedBubble is (S-1)/(M+S-1): the fraction of the time a stage
	// waits when all stages take the same time.
	ExpectedBubble float64
	// MeasuredBubble is the stages' idle time over their total time: each
	// stage's idle time is the span of the pass less the time it spent on
	// its own forward and backward steps (each step ending when its device
	// finished it).
	MeasuredBubble float64
	// Span is the wall-clock time from the first stage's first step to the
	// last stage's last.
	Span time.Duration
	// StageReports has one entry per stage.
	StageReports []StageReport
}

// StageReport is one stage's part of a [PipelineReport].
type StageReport struct {
	Device            vram.Device
	Forward, Backward time.Duration // busy time
	Idle              time.Duration
	// MaxHeld is the most micro-batches whose activations the stage held
	// at once: all of them under GPipe, at most S-s under 1F1B. After
	// Forward it is all of them with gradients on (the graph keeps them
	// until the caller's Backward) and one with gradients off.
	MaxHeld int
	// Allocated and MaxAllocated are the device's live and peak bytes
	// (vram.MemoryAllocated, vram.MaxMemoryAllocated) after the pass.
	Allocated, MaxAllocated int64
}

func (r *pipeRun) report(n int) PipelineReport {
	m := len(r.sizes)
	rep := PipelineReport{Schedule: r.p.sched, Stages: n, MicroBatches: m,
		ExpectedBubble: float64(n-1) / float64(m+n-1)}
	var first, last time.Duration = -1, 0
	for _, ts := range r.times {
		for _, t := range ts {
			if first < 0 || t.start < first {
				first = t.start
			}
			last = max(last, t.end)
		}
	}
	rep.Span = max(last-first, 0)
	var idle time.Duration
	for s, ts := range r.times {
		sr := StageReport{Device: r.p.stages[s].Device, MaxHeld: r.held[s]}
		for _, t := range ts {
			if t.backward {
				sr.Backward += t.end - t.start
			} else {
				sr.Forward += t.end - t.start
			}
		}
		sr.Idle = max(rep.Span-sr.Forward-sr.Backward, 0)
		idle += sr.Idle
		sr.Allocated, sr.MaxAllocated = vram.MemoryAllocated(sr.Device), vram.MaxMemoryAllocated(sr.Device)
		rep.StageReports = append(rep.StageReports, sr)
	}
	if rep.Span > 0 {
		rep.MeasuredBubble = float64(idle) / float64(time.Duration(n)*rep.Span)
	}
	return rep
}

// Report returns the report of the last ForwardBackward or Forward.
func (p *Pipeline) Report() PipelineReport { return p.last }

// String formats the report: the bubbles, then a table of the stages.
func (r PipelineReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline of %d stages, %d micro-batches, %v: bubble expected %.1f%%, measured %.1f%% of %v\n",
		r.Stages, r.MicroBatches, r.Schedule, 100*r.ExpectedBubble, 100*r.MeasuredBubble, r.Span.Round(time.Microsecond))
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "stage\tdevice\tforward\tbackward\tidle\theld\tallocated\tpeak\t")
	for s, x := range r.StageReports {
		fmt.Fprintf(w, "%d\t%v\t%v\t%v\t%v\t%d\t%s\t%s\t\n", s, x.Device, x.Forward.Round(time.Microsecond),
			x.Backward.Round(time.Microsecond), x.Idle.Round(time.Microsecond), x.MaxHeld, mib(x.Allocated), mib(x.MaxAllocated))
	}
	w.Flush()
	return b.String()
}

// NamedParameters returns the stages' parameters, stage i's named "i."
// + their names, as a Sequential of the stages would.
func (p *Pipeline) NamedParameters() []nn.NamedParameter {
	var out []nn.NamedParameter
	seen := map[*vram.Tensor]bool{}
	for i, s := range p.stages {
		for _, np := range s.Module.NamedParameters() {
			if !seen[np.Tensor] {
				seen[np.Tensor] = true
				out = append(out, nn.NamedParameter{Name: fmt.Sprintf("%d.%s", i, np.Name), Tensor: np.Tensor})
			}
		}
	}
	return out
}

// NamedBuffers returns the stages' buffers, stage i's named "i." + their
// names as the parameters are, so that [nn.StateDict] and [nn.Save] of the
// Pipeline keep them (BatchNorm's running statistics).
func (p *Pipeline) NamedBuffers() []nn.NamedParameter {
	var out []nn.NamedParameter
	seen := map[*vram.Tensor]bool{}
	for i, s := range p.stages {
		for _, b := range nn.NamedBuffers(s.Module) {
			if !seen[b.Tensor] {
				seen[b.Tensor] = true
				out = append(out, nn.NamedParameter{Name: fmt.Sprintf("%d.%s", i, b.Name), Tensor: b.Tensor})
			}
		}
	}
	return out
}

// Parameters returns the tensors of NamedParameters.
func (p *Pipeline) Parameters() []*vram.Tensor {
	var out []*vram.Tensor
	for _, np := range p.NamedParameters() {
		out = append(out, np.Tensor)
	}
	return out
}

// NamedChildren returns the stages' modules, named "0", "1", ...
func (p *Pipeline) NamedChildren() []nn.NamedModule {
	out := make([]nn.NamedModule, len(p.stages))
	for i, s := range p.stages {
		out[i] = nn.NamedModule{Name: fmt.Sprint(i), Module: s.Module}
	}
	return out
}

// To does nothing when every stage is on d already; otherwise it panics
// with an [*vram.Error] of kind vram.ErrArgument, since the stages stay on
// their own devices (make a new Pipeline to place them elsewhere).
func (p *Pipeline) To(d vram.Device) {
	for _, s := range p.stages {
		if s.Device != d {
			panic(&vram.Error{Op: "pipeline to", Kind: vram.ErrArgument, Detail: fmt.Sprintf(
				"the stages stay on their devices (stage on %v); make a new Pipeline to place them elsewhere", s.Device)})
		}
	}
}

// CUDA is To(vram.CUDA(index...)).
func (p *Pipeline) CUDA(index ...int) { p.To(vram.CUDA(index...)) }

// CPU is To(vram.CPU).
func (p *Pipeline) CPU() { p.To(vram.CPU) }

// Train puts every stage in training mode.
func (p *Pipeline) Train() {
	for _, s := range p.stages {
		s.Module.Train()
	}
}

// Eval puts every stage in evaluation mode.
func (p *Pipeline) Eval() {
	for _, s := range p.stages {
		s.Module.Eval()
	}
}

// Training reports whether the first stage is in training mode.
func (p *Pipeline) Training() bool { return p.stages[0].Module.Training() }
