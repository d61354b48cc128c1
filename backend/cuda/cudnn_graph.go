package cuda

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/cudnn"
)

// Convolutions through cuDNN's graph (backend) API, as PyTorch runs them
// through cudnn-frontend: each convolution is an operation graph of one
// CONVOLUTION_FORWARD, BACKWARD_DATA or BACKWARD_FILTER node, which the
// engine heuristics (mode A) rank into engine configurations; the first
// that finalizes into an execution plan is kept (in benchmark mode, the
// fastest of the first CuDNNSettings.BenchmarkLimit that finalize, from
// the heuristics and then cuDNN's fallback list, as PyTorch's search
// takes both, timed on the call's own buffers once each and the fastest
// three again over three runs). Plans are cached per convolution key,
// direction, pointer alignments, mode and limit, as the legacy path
// caches its algorithms. The
// graph path is tried first; any failure to build, finalize or run a plan
// marks its key for the legacy path (cudnnConvolution*) from then on, and
// the call goes there at once, so that a failure costs one attempt and
// never a result. CuDNNSettings.NoGraphAPI turns the path off.

// graphFault, when set (by tests), is asked at each named step of the
// graph path ("build", "execute") and fails it with the error it returns.
var graphFault func(step string) error

// maxGraphConfigs bounds the engine configurations read from the
// heuristics for one key.
const maxGraphConfigs = 64

// The tensors' unique ids in a convolution's graph: x (or dx), w (or dw),
// y (or dy), in the order of the legacy path's pointer triples.
var graphUIDs = [3]int64{1, 2, 3}

// graphKey identifies a graph-API plan: the convolution, its direction,
// the byte alignment of the three pointers (which a plan may rely on) and
// the mode it was chosen under.
type graphKey struct {
	conv       convKey
	dir        convDir
	align      [3]uint8
	bench, det bool
	// limit is the benchmark limit the plan was searched under (0
	// outside benchmark mode).
	limit int
	// acc adds the result to its destination (beta 1: dx += for the
	// backward data pass of Conv2DBackwardDataAccumulate).
	acc bool
}

// graphPlan is a finalized execution plan with the descriptors it was
// built from (kept alive with it), or, with plan zero, a key left to the
// legacy path and why.
type graphPlan struct {
	plan  cudnn.BackendDescriptor
	ws    uint64
	owned []cudnn.BackendDescriptor
	why   string
}

func (gp *graphPlan) destroy() {
	if gp.plan != 0 {
		cudnn.BackendDestroyDescriptor(gp.plan)
		gp.plan = 0
	}
	for _, d := range gp.owned {
		cudnn.BackendDestroyDescriptor(d)
	}
	gp.owned = nil
}

// CuDNNGraphStats counts the work of the graph-API convolution path,
// summed over the process's GPUs.
type CuDNNGraphStats struct {
	// Plans counts the execution plans built and kept, one per
	// convolution key, direction, alignment and mode.
	Plans int64
	// Executions counts the convolutions that ran through a plan.
	Executions int64
	// Fallbacks counts the keys whose plan could not be built or run
	// (the legacy API takes them from then on), and the calls whose
	// plan's workspace could not be allocated.
	Fallbacks int64
	// Failures holds the first distinct reasons of those fallbacks (at
	// most 16), each naming the convolution, the step and cuDNN's status.
	Failures []string
}

var graphStats struct {
	plans, execs, fallbacks atomic.Int64
	mu                      sync.Mutex
	failures                []string
}

// CuDNNGraphStatistics returns the graph path's counts since the process
// started.
func CuDNNGraphStatistics() CuDNNGraphStats {
	graphStats.mu.Lock()
	defer graphStats.mu.Unlock()
	return CuDNNGraphStats{Plans: graphStats.plans.Load(), Executions: graphStats.execs.Load(),
		Fallbacks: graphStats.fallbacks.Load(), Failures: slices.Clone(graphStats.failures)}
}

// graphFailed counts a fallback to the legacy path and keeps its reason.
func graphFailed(why string) {
	graphStats.fallbacks.Add(1)
	graphStats.mu.Lock()
	defer graphStats.mu.Unlock()
	if len(graphStats.failures) < 16 && !slices.Contains(graphStats.failures, why) {
		graphStats.failures = append(graphStats.failures, why)
	}
}

func (k graphKey) String() string {
	c := k.conv
	return fmt.Sprintf("%s %s x%v %s w%v %s y%v %s stride %v pad %v dilation %v groups %d",
		k.dir, c.dt, c.x, c.lx, c.w, c.lw, c.y, c.ly, c.p.Stride, c.p.Padding, c.p.Dilation, c.p.Groups)
}

// graphConv runs the convolution of key in direction dir on ptrs (x, w,
// y, or their gradients) through the graph API, building its plan on
// first use, and reports whether it did; false sends the caller to the
// legacy path. The cuDNN lock is held and the handle is on the queue's
// stream.
func (d *queue) graphConv(h cudnn.Handle, key convKey, dir convDir, ptrs [3]cuda.DevicePtr) bool {
	return d.graphConvBeta(h, key, dir, ptrs, false)
}

// graphConvBeta is graphConv that, with acc, adds the result to the
// destination's values (the operation's beta is 1).
func (d *queue) graphConvBeta(h cudnn.Handle, key convKey, dir convDir, ptrs [3]cuda.DevicePtr, acc bool) bool {
	s := cudnnSettings.Load()
	if s&dnnNoGraph != 0 {
		return false
	}
	gk := graphKey{conv: key, dir: dir, bench: s&dnnBenchmark != 0, det: s&dnnDeterministic != 0, acc: acc}
	if gk.bench {
		gk.limit = benchLimit(s)
	}
	for i, p := range ptrs {
		gk.align[i] = uint8(min(alignment(p), 16)) // the byte alignment cuDNN is told
	}
	st := &d.dnn
	if st.graphs == nil {
		st.graphs = map[graphKey]*graphPlan{}
	}
	gp, ok := st.graphs[gk]
	if !ok {
		if len(st.graphs) >= maxDNNPlans {
			for k, old := range st.graphs {
				old.destroy()
				delete(st.graphs, k)
			}
		}
		var err error
		gp, err = d.buildGraphPlan(h, gk, ptrs)
		if err != nil {
			gp = &graphPlan{why: fmt.Sprintf("cuda:%d: %s: %v", d.index, gk, err)}
			graphFailed(gp.why)
		} else {
			graphStats.plans.Add(1)
		}
		st.graphs[gk] = gp
	}
	if gp.plan == 0 {
		return false
	}
	buf, ws, err := d.dnnWorkspace(gp.ws)
	if err != nil {
		graphFailed(fmt.Sprintf("cuda:%d: %s: workspace of %d bytes: %v", d.index, gk, gp.ws, err))
		return false
	}
	if graphFault != nil {
		err = graphFault("execute")
	}
	if err == nil {
		err = graphExecute(h, gp.plan, ptrs, ws)
	}
	d.freeWorkspace(buf)
	if err != nil {
		gp.destroy()
		gp.why = fmt.Sprintf("cuda:%d: %s: execute: %v", d.index, gk, err)
		graphFailed(gp.why)
		return false
	}
	graphStats.execs.Add(1)
	return true
}

// graphExecute runs a plan on a variant pack of ptrs and the workspace.
func graphExecute(h cudnn.Handle, plan cudnn.BackendDescriptor, ptrs [3]cuda.DevicePtr, ws cuda.DevicePtr) error {
	vp, err := cudnn.BackendCreateDescriptor(cudnn.DescVariantPack)
	if err != nil {
		return fmt.Errorf("variant pack: %w", err)
	}
	defer cudnn.BackendDestroyDescriptor(vp)
	if err := cudnn.SetAttrInt64s(vp, cudnn.AttrVariantPackUniqueIDs, graphUIDs[:]...); err != nil {
		return fmt.Errorf("variant pack unique ids: %w", err)
	}
	if err := cudnn.SetAttrPointers(vp, cudnn.AttrVariantPackDataPointers, ptrs[:]...); err != nil {
		return fmt.Errorf("variant pack data pointers: %w", err)
	}
	if err := cudnn.SetAttrPointers(vp, cudnn.AttrVariantPackWorkspace, ws); err != nil {
		return fmt.Errorf("variant pack workspace: %w", err)
	}
	if err := cudnn.BackendFinalize(vp); err != nil {
		return fmt.Errorf("variant pack: %w", err)
	}
	return cudnn.BackendExecute(h, plan, vp)
}

// graphBuilder collects the descriptors of one key's graph, destroyed
// together unless a plan keeps them.
type graphBuilder struct {
	owned []cudnn.BackendDescriptor
}

func (b *graphBuilder) create(t cudnn.DescriptorType, what string) (cudnn.BackendDescriptor, error) {
	desc, err := cudnn.BackendCreateDescriptor(t)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	b.owned = append(b.owned, desc)
	return desc, nil
}

func (b *graphBuilder) destroy() {
	for _, desc := range b.owned {
		cudnn.BackendDestroyDescriptor(desc)
	}
	b.owned = nil
}

// steps runs the setters in order and names the first that fails.
func steps(what string, fns ...func() error) error {
	for i, fn := range fns {
		if err := fn(); err != nil {
			return fmt.Errorf("%s (step %d): %w", what, i+1, err)
		}
	}
	return nil
}

// tensor makes the finalized descriptor of a 4-D tensor of sizes s in
// layout l.
func (b *graphBuilder) tensor(what string, t cudnn.DataType, uid int64, s [4]int, l layout, align uint8) (cudnn.BackendDescriptor, error) {
	desc, err := b.create(cudnn.DescTensor, what)
	if err != nil {
		return 0, err
	}
	ns, cs, hs, ws := l.strides(s[1], s[2], s[3])
	return desc, steps("tensor "+what,
		func() error { return cudnn.SetAttrDataType(desc, cudnn.AttrTensorDataType, t) },
		func() error {
			return cudnn.SetAttrInt64s(desc, cudnn.AttrTensorDimensions, int64(s[0]), int64(s[1]), int64(s[2]), int64(s[3]))
		},
		func() error {
			return cudnn.SetAttrInt64s(desc, cudnn.AttrTensorStrides, int64(ns), int64(cs), int64(hs), int64(ws))
		},
		func() error { return cudnn.SetAttrInt64s(desc, cudnn.AttrTensorUniqueID, uid) },
		func() error { return cudnn.SetAttrInt64s(desc, cudnn.AttrTensorByteAlignment, int64(align)) },
		func() error { return cudnn.BackendFinalize(desc) },
	)
}

// The attributes of each direction's operation: its descriptor type and
// the names of x, w, y (or their gradients), alpha, beta and the
// convolution.
var graphOps = [...]struct {
	typ                        cudnn.DescriptorType
	x, w, y, alpha, beta, conv cudnn.AttrName
}{
	dirForward: {cudnn.DescOperationConvolutionForward, cudnn.AttrConvFwdX, cudnn.AttrConvFwdW, cudnn.AttrConvFwdY,
		cudnn.AttrConvFwdAlpha, cudnn.AttrConvFwdBeta, cudnn.AttrConvFwdConvDesc},
	dirData: {cudnn.DescOperationConvolutionBwdData, cudnn.AttrConvBwdDataDX, cudnn.AttrConvBwdDataW, cudnn.AttrConvBwdDataDY,
		cudnn.AttrConvBwdDataAlpha, cudnn.AttrConvBwdDataBeta, cudnn.AttrConvBwdDataConv},
	dirFilter: {cudnn.DescOperationConvolutionBwdFilter, cudnn.AttrConvBwdFilterX, cudnn.AttrConvBwdFilterDW, cudnn.AttrConvBwdFilterDY,
		cudnn.AttrConvBwdFilterAlpha, cudnn.AttrConvBwdFilterBeta, cudnn.AttrConvBwdFilterConv},
}

// operationGraph builds and finalizes the graph of gk's one convolution.
func (b *graphBuilder) operationGraph(h cudnn.Handle, gk graphKey) (cudnn.BackendDescriptor, error) {
	key := gk.conv
	t, _ := dnnType(key.dt)
	var td [3]cudnn.BackendDescriptor
	for i, v := range []struct {
		name string
		s    [4]int
		l    layout
	}{{"x", key.x, key.lx}, {"w", key.w, key.lw}, {"y", key.y, key.ly}} {
		var err error
		if td[i], err = b.tensor(v.name, t, graphUIDs[i], v.s, v.l, gk.align[i]); err != nil {
			return 0, err
		}
	}
	cd, err := b.create(cudnn.DescConvolution, "convolution")
	if err != nil {
		return 0, err
	}
	p := key.p
	pad := []int64{int64(p.Padding[0]), int64(p.Padding[1])}
	if err := steps("convolution",
		func() error { return cudnn.SetAttrInt64s(cd, cudnn.AttrConvolutionSpatialDims, 2) },
		func() error { return cudnn.SetAttrDataType(cd, cudnn.AttrConvolutionCompType, cudnn.DataFloat) },
		func() error { return cudnn.SetAttrConvMode(cd, cudnn.AttrConvolutionConvMode, cudnn.CrossCorrelation) },
		func() error {
			return cudnn.SetAttrInt64s(cd, cudnn.AttrConvolutionDilations, int64(p.Dilation[0]), int64(p.Dilation[1]))
		},
		func() error {
			return cudnn.SetAttrInt64s(cd, cudnn.AttrConvolutionFilterStrides, int64(p.Stride[0]), int64(p.Stride[1]))
		},
		func() error { return cudnn.SetAttrInt64s(cd, cudnn.AttrConvolutionPrePaddings, pad...) },
		func() error { return cudnn.SetAttrInt64s(cd, cudnn.AttrConvolutionPostPaddings, pad...) },
		func() error { return cudnn.BackendFinalize(cd) },
	); err != nil {
		return 0, err
	}
	o := graphOps[gk.dir]
	beta := float32(0)
	if gk.acc {
		beta = 1
	}
	op, err := b.create(o.typ, "operation")
	if err != nil {
		return 0, err
	}
	if err := steps("operation "+gk.dir.String(),
		func() error { return cudnn.SetAttrDescriptors(op, o.x, td[0]) },
		func() error { return cudnn.SetAttrDescriptors(op, o.w, td[1]) },
		func() error { return cudnn.SetAttrDescriptors(op, o.y, td[2]) },
		func() error { return cudnn.SetAttrDescriptors(op, o.conv, cd) },
		func() error { return cudnn.SetAttrFloat(op, o.alpha, 1) },
		func() error { return cudnn.SetAttrFloat(op, o.beta, beta) },
		func() error { return cudnn.BackendFinalize(op) },
	); err != nil {
		return 0, err
	}
	g, err := b.create(cudnn.DescOperationGraph, "operation graph")
	if err != nil {
		return 0, err
	}
	return g, steps("operation graph",
		func() error { return cudnn.SetAttrHandle(g, cudnn.AttrOperationGraphHandle, h) },
		func() error { return cudnn.SetAttrDescriptors(g, cudnn.AttrOperationGraphOps, op) },
		func() error { return cudnn.BackendFinalize(g) },
	)
}

// engineConfigs returns the graph's engine configurations that the
// heuristics of mode m rank, best first.
func (b *graphBuilder) engineConfigs(g cudnn.BackendDescriptor, m cudnn.HeurMode) ([]cudnn.BackendDescriptor, error) {
	heur, err := b.create(cudnn.DescEngineHeuristics, "engine heuristics")
	if err != nil {
		return nil, err
	}
	if err := steps(fmt.Sprintf("engine heuristics (mode %d)", m),
		func() error { return cudnn.SetAttrDescriptors(heur, cudnn.AttrEngineHeurOperationGraph, g) },
		func() error { return cudnn.SetAttrHeurMode(heur, cudnn.AttrEngineHeurMode, m) },
		func() error { return cudnn.BackendFinalize(heur) },
	); err != nil {
		return nil, err
	}
	// The count first (no elements requested); should cuDNN refuse that
	// query, ask for up to 16 configurations outright.
	n, err := cudnn.GetAttrDescriptors(heur, cudnn.AttrEngineHeurResults, nil)
	if err != nil {
		n = 16
	}
	n = min(n, maxGraphConfigs)
	if n <= 0 {
		return nil, nil
	}
	cfgs := make([]cudnn.BackendDescriptor, n)
	for i := range cfgs {
		if cfgs[i], err = b.create(cudnn.DescEngineConfig, "engine config"); err != nil {
			return nil, err
		}
	}
	got, err := cudnn.GetAttrDescriptors(heur, cudnn.AttrEngineHeurResults, cfgs)
	if err != nil {
		return nil, fmt.Errorf("engine heuristics results: %w", err)
	}
	return cfgs[:min(got, n)], nil
}

// allowed reports whether an engine configuration keeps to the switches,
// as PyTorch filters them: never one that converts its inputs down; no
// nondeterministic one in deterministic mode; no tensor cores (TF32) for
// float32 with TF32 off. Engines that reduce in reduced precision are
// left out too, so that the graph path is as accurate as the legacy one.
func (b *graphBuilder) allowed(cfg cudnn.BackendDescriptor, gk graphKey) (bool, error) {
	eng, err := b.create(cudnn.DescEngine, "engine")
	if err != nil {
		return false, err
	}
	if _, err := cudnn.GetAttrDescriptors(cfg, cudnn.AttrEngineConfigEngine, []cudnn.BackendDescriptor{eng}); err != nil {
		return false, fmt.Errorf("engine of a config: %w", err)
	}
	notes, err := cudnn.GetAttrNumericalNotes(eng)
	if err != nil {
		return false, fmt.Errorf("numerical notes: %w", err)
	}
	for _, n := range notes {
		switch {
		case n == cudnn.NoteDownConvertInputs, n == cudnn.NoteReducedPrecisionReduction,
			n == cudnn.NoteNonDeterministic && gk.det,
			n == cudnn.NoteTensorCore && gk.conv.dt == backend.Float32 && !gk.conv.tf32:
			return false, nil
		}
	}
	return true, nil
}

// finalizePlan finalizes an execution plan of cfg and returns it with its
// workspace size; the caller owns it.
func finalizePlan(h cudnn.Handle, cfg cudnn.BackendDescriptor) (cudnn.BackendDescriptor, uint64, error) {
	pl, err := cudnn.BackendCreateDescriptor(cudnn.DescExecutionPlan)
	if err != nil {
		return 0, 0, fmt.Errorf("execution plan: %w", err)
	}
	var ws int64
	err = steps("execution plan",
		func() error { return cudnn.SetAttrHandle(pl, cudnn.AttrExecutionPlanHandle, h) },
		func() error { return cudnn.SetAttrDescriptors(pl, cudnn.AttrExecutionPlanEngineConfig, cfg) },
		func() error { return cudnn.BackendFinalize(pl) },
		func() (err error) {
			ws, err = cudnn.GetAttrInt64(pl, cudnn.AttrExecutionPlanWorkspaceSize)
			if err == nil && ws < 0 {
				err = fmt.Errorf("workspace size %d", ws)
			}
			return err
		},
	)
	if err != nil {
		cudnn.BackendDestroyDescriptor(pl)
		return 0, 0, err
	}
	return pl, uint64(ws), nil
}

// candidatePlan is a finalized plan under consideration.
type candidatePlan struct {
	plan cudnn.BackendDescriptor
	ws   uint64
}

// buildGraphPlan builds gk's plan: the operation graph, the heuristics'
// engine configurations (mode A, then the fallback mode when A gives none
// that works) filtered by the switches, and the first that finalizes
// within maxSearchWorkspace, or in benchmark mode the fastest of the
// first gk.limit that finalize (mode A's, then the fallback mode's), timed
// on ptrs (the direction's output is overwritten). The cuDNN lock is held.
func (d *queue) buildGraphPlan(h cudnn.Handle, gk graphKey, ptrs [3]cuda.DevicePtr) (*graphPlan, error) {
	if graphFault != nil {
		if err := graphFault("build"); err != nil {
			return nil, err
		}
	}
	b := &graphBuilder{}
	ok := false
	defer func() {
		if !ok {
			b.destroy()
		}
	}()
	start := time.Now()
	g, err := b.operationGraph(h, gk)
	if err != nil {
		return nil, err
	}
	want := 1
	if gk.bench {
		want = gk.limit
	}
	var cands []candidatePlan
	defer func() {
		for _, c := range cands {
			cudnn.BackendDestroyDescriptor(c.plan)
		}
	}()
	var reasons []string
	seen, filtered := 0, 0
	for _, mode := range []cudnn.HeurMode{cudnn.HeurModeA, cudnn.HeurModeFallback} {
		cfgs, err := b.engineConfigs(g, mode)
		if mode == cudnn.HeurModeA && !gk.bench {
			dnnStats.heuristics.Add(1)
		}
		if err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		for _, cfg := range cfgs {
			if len(cands) >= want {
				break
			}
			seen++
			if fine, err := b.allowed(cfg, gk); err != nil || !fine {
				if err != nil {
					reasons = append(reasons, err.Error())
				} else {
					filtered++
				}
				continue
			}
			pl, ws, err := finalizePlan(h, cfg)
			if err != nil {
				reasons = append(reasons, err.Error())
				continue
			}
			if ws > maxSearchWorkspace {
				cudnn.BackendDestroyDescriptor(pl)
				continue
			}
			cands = append(cands, candidatePlan{pl, ws})
		}
		// Benchmark mode goes on to the fallback list for more
		// candidates, as PyTorch's search does; otherwise the heuristics'
		// first working configuration is the choice.
		if len(cands) >= want || len(cands) > 0 && !gk.bench {
			break
		}
	}
	if len(cands) == 0 {
		why := fmt.Sprintf("no execution plan: of %d engine configurations from the heuristics (modes A and fallback), %d left out by their numerical notes under the switches, %d failed",
			seen, filtered, len(reasons))
		if len(reasons) > 0 {
			why += "; first failure: " + reasons[0]
		}
		return nil, errors.New(why)
	}
	best := 0
	if gk.bench {
		if len(cands) > 1 {
			best, err = d.fastestPlanOf(h, gk, cands, ptrs)
		}
		dnnStats.searches.Add(1)
		dnnStats.searchNanos.Add(int64(time.Since(start)))
		if err != nil {
			return nil, err
		}
	}
	gp := &graphPlan{plan: cands[best].plan, ws: cands[best].ws, owned: b.owned}
	cands = slices.Delete(cands, best, best+1)
	ok = true
	return gp, nil
}

// fastestPlanOf is fastestPlan, timing a plan that adds to its
// destination (gk.acc) on a scratch destination of the same size, so that
// the timed runs leave the real one as it was.
func (d *queue) fastestPlanOf(h cudnn.Handle, gk graphKey, cands []candidatePlan, ptrs [3]cuda.DevicePtr) (int, error) {
	if !gk.acc {
		return d.fastestPlan(h, cands, ptrs)
	}
	s := gk.conv.x // the destination of the backward data pass, dx
	if gk.dir != dirData {
		return 0, fmt.Errorf("an accumulating plan for %s", gk.dir)
	}
	b, err := d.Alloc(int64(s[0]*s[1]*s[2]*s[3]*gk.conv.dt.Size()), d.st, CuDNNWorkspaceRegion)
	if err != nil {
		return 0, err
	}
	defer d.Free(b, d.st)
	ptrs[0] = b.(*Buffer).ptr
	return d.fastestPlan(h, cands, ptrs)
}

// fastestPlan times each candidate once (after a run to warm it up) on
// ptrs with one workspace as large as the hungriest one that fits in
// memory, and returns the index of the fastest. Candidates whose run
// fails are skipped; none running is an error.
func (d *queue) fastestPlan(h cudnn.Handle, cands []candidatePlan, ptrs [3]cuda.DevicePtr) (int, error) {
	limit := uint64(0)
	for _, c := range cands {
		limit = max(limit, c.ws)
	}
	var buf *Buffer
	var ws cuda.DevicePtr
	for {
		var err error
		buf, ws, err = d.dnnWorkspace(limit)
		if err == nil {
			break
		}
		if !isOOM(err) {
			return 0, err
		}
		next := uint64(0)
		for _, c := range cands {
			if c.ws < limit {
				next = max(next, c.ws)
			}
		}
		if next == limit || limit == 0 {
			return 0, err
		}
		limit = next
	}
	defer d.freeWorkspace(buf)
	start, err := cuda.EventCreate(cuda.EventDefault)
	if err != nil {
		return 0, err
	}
	defer cuda.EventDestroy(start)
	end, err := cuda.EventCreate(cuda.EventDefault)
	if err != nil {
		return 0, err
	}
	defer cuda.EventDestroy(end)
	type timed struct {
		i  int
		el time.Duration
	}
	var ran []timed
	var first error
	for i, c := range cands {
		if c.ws > limit {
			continue
		}
		el, err := timeGraphPlan(h, c.plan, ptrs, ws, start, end, d.stream, 1)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		ran = append(ran, timed{i, el})
	}
	if len(ran) == 0 {
		return 0, fmt.Errorf("benchmark: no plan ran: %w", first)
	}
	// One run can read well below what a plan takes run after run, so
	// the fastest few are timed again over confirmRuns runs in a row and
	// the fastest of those is the choice.
	slices.SortStableFunc(ran, func(a, b timed) int { return cmp.Compare(a.el, b.el) })
	best, bestTime := ran[0].i, time.Duration(-1)
	for _, r := range ran[:min(len(ran), confirmPlans)] {
		el, err := timeGraphPlan(h, cands[r.i].plan, ptrs, ws, start, end, d.stream, confirmRuns)
		if err != nil {
			continue
		}
		if bestTime < 0 || el < bestTime {
			best, bestTime = r.i, el
		}
	}
	return best, nil
}

// Benchmark mode's second look: the confirmPlans fastest plans of the
// first timing are timed again over confirmRuns runs in a row each. On an
// H100 (2026-12-05) single runs had picked plans for bf16 ResNet-50
// convolutions that then ran 5 to 10 times slower than the plans they
// displaced.
const (
	confirmPlans = 3
	confirmRuns  = 3
)

// timeGraphPlan runs a plan once to warm it up, then times n runs in a row
// with the two events on stream s and returns the time of one.
func timeGraphPlan(h cudnn.Handle, pl cudnn.BackendDescriptor, ptrs [3]cuda.DevicePtr, ws cuda.DevicePtr, start, end cuda.Event, s cuda.Stream, n int) (time.Duration, error) {
	if err := graphExecute(h, pl, ptrs, ws); err != nil {
		return 0, err
	}
	if err := cuda.EventRecord(start, s); err != nil {
		return 0, err
	}
	for range n {
		if err := graphExecute(h, pl, ptrs, ws); err != nil {
			return 0, err
		}
	}
	if err := cuda.EventRecord(end, s); err != nil {
		return 0, err
	}
	if err := cuda.EventSynchronize(end); err != nil {
		return 0, err
	}
	el, err := cuda.EventElapsedTime(start, end)
	return el / time.Duration(n), err
}

// graphEpilogue adds the bias and applies ReLU after a forward
// convolution that the graph path computed, with the legacy descriptors
// of y and the bias (bd, made when there is a bias).
func graphEpilogue(h cudnn.Handle, act cudnn.ActivationDesc, yd cudnn.TensorDesc, yp cuda.DevicePtr,
	bd cudnn.TensorDesc, bp cuda.DevicePtr, hasBias, relu bool) error {
	if hasBias {
		if err := cudnn.AddTensor(h, one, bd, bp, one, yd, yp); err != nil {
			return err
		}
	}
	if relu {
		return cudnn.ActivationForward(h, act, one, yd, yp, zero, yd, yp)
	}
	return nil
}
