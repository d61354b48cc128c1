package cuda

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
)

// Launch geometry.
const (
	// maxDims is the most dimensions a strided kernel walks after merging
	// (kernels/common.cuh's MAXD); views with more are split on the host.
	maxDims = 8
	// blockThreads is the number of threads of each block.
	blockThreads = 256
	// blocksPerSM bounds the grid of grid-stride kernels: enough blocks to
	// fill every multiprocessor several times over.
	blocksPerSM = 16
	// unroll is the number of elements each thread of a strided
	// elementwise kernel takes per step (kernels/common.cuh's UNROLL).
	unroll = 4
)

func errorIs(err, target error) bool { return errors.Is(err, target) }

// ptrOf returns the device address of v's first element. v must have a
// buffer of this device.
func (d *Device) ptrOf(what string, v backend.View) (cuda.DevicePtr, error) {
	b, ok := v.Buf.(*Buffer)
	if !ok {
		return 0, fmt.Errorf("cuda: %s: buffer of type %T is not CUDA memory", what, v.Buf)
	}
	if b.block == nil {
		return 0, fmt.Errorf("cuda: %s: buffer was freed", what)
	}
	if b.dev != d {
		return 0, fmt.Errorf("cuda: %s: buffer of cuda:%d used on cuda:%d", what, b.dev.index, d.index)
	}
	if b.ptr == 0 && v.NumElements() != 0 {
		// A zero-byte buffer has no memory (address 0): only views with no
		// elements may use it, and no kernel may get its address.
		return 0, fmt.Errorf("cuda: %s: view of %d elements on a zero-byte buffer", what, v.NumElements())
	}
	return b.ptr + cuda.DevicePtr(v.Offset*v.DType.Size()), nil
}

// module returns module k loaded into d's context, compiling it (or
// reading the disk cache) on first use. The context must be current.
func (d *Device) module(k modKey) (*loadedModule, error) {
	v, ok := d.mods.Load(k)
	if !ok {
		v, _ = d.mods.LoadOrStore(k, &loadedModule{})
	}
	m := v.(*loadedModule)
	m.once.Do(func() {
		img, err := cubin(k, d.arch)
		if err != nil {
			m.err = err
			return
		}
		mod, err := cuda.ModuleLoadData(img)
		if err != nil && d.lost.Load() == nil {
			// A damaged cache file: compile again, bypassing the caches.
			if img, err = recompile(k, d.arch); err == nil {
				mod, err = cuda.ModuleLoadData(img)
			}
		}
		if err != nil {
			m.err = fmt.Errorf("cuda: cuda:%d: loading the kernels of %s: %w", d.index, k, d.check(err))
			return
		}
		m.mod = mod
	})
	return m, m.err
}

// function returns kernel name of module k. The context must be current.
func (d *Device) function(k modKey, name string) (cuda.Function, error) {
	m, err := d.module(k)
	if err != nil {
		return 0, err
	}
	if f, ok := m.fns.Load(name); ok {
		return f.(cuda.Function), nil
	}
	f, err := cuda.ModuleGetFunction(m.mod, name)
	if err != nil {
		return 0, fmt.Errorf("cuda: kernel %s of %s: %w", name, k, err)
	}
	m.fns.Store(name, f)
	return f, nil
}

// grid returns the number of blocks for n units of work of blockThreads
// each, bounded for grid-stride kernels.
func (d *Device) grid(units int64) uint32 {
	b := (units + blockThreads - 1) / blockThreads
	return uint32(max(1, min(b, int64(d.sms*blocksPerSM))))
}

// launch queues f on the stream with the given number of blocks.
func (d *queue) launch(f cuda.Function, blocks uint32, a *cuda.KernelArgs) error {
	err := cuda.LaunchKernel(f, cuda.Dim3{X: blocks, Y: 1, Z: 1}, cuda.Dim3{X: blockThreads, Y: 1, Z: 1}, 0, d.stream, a)
	return d.check(err)
}

// merge drops the dimensions of size 1 and merges neighbours across which
// every operand is contiguous. It returns the merged shape and strides,
// outermost first.
func merge(shape []int, strides [][]int) ([]int, [][]int) {
	ms := make([]int, 0, len(shape))
	mst := make([][]int, len(strides))
	for k := range strides {
		mst[k] = make([]int, 0, len(shape))
	}
	for dim, n := range shape {
		if n == 1 {
			continue
		}
		last := len(ms) - 1
		can := last >= 0
		for k := 0; can && k < len(strides); k++ {
			if mst[k][last] != strides[k][dim]*n {
				can = false
			}
		}
		if can {
			ms[last] *= n
			for k := range strides {
				mst[k][last] = strides[k][dim]
			}
			continue
		}
		ms = append(ms, n)
		for k := range strides {
			mst[k] = append(mst[k], strides[k][dim])
		}
	}
	return ms, mst
}

// addIdx appends a strided space's parameters (nd, small, the shape and
// every operand's strides, innermost first, padded to maxDims) to a.
func addIdx(a *cuda.KernelArgs, n int64, shape []int, strides [][]int) {
	nd := len(shape)
	a.Int32(int32(nd))
	small := int32(0)
	if n < 1<<32 {
		small = 1
	}
	a.Int32(small)
	for i := range maxDims {
		if i < nd {
			a.Int64(int64(shape[nd-1-i]))
		} else {
			a.Int64(1)
		}
	}
	for _, st := range strides {
		for i := range maxDims {
			if i < nd {
				a.Int64(int64(st[nd-1-i]))
			} else {
				a.Int64(0)
			}
		}
	}
}

// ewOp is an operand of an elementwise launch: its first element's address,
// its element size and its strides.
type ewOp struct {
	ptr     cuda.DevicePtr
	size    int
	strides []int
}

// ewKernel names the contiguous and strided kernels of an elementwise op
// ("" when there is no contiguous one).
type ewKernel struct {
	key  modKey
	c, s string
	// r, when set, is a binary kernel for a row broadcast (one operand a
	// vector repeated along the other, as a bias is); ewise picks it for
	// that layout.
	r string
	// t, when set, is a kernel for a 2-D space whose input (a copy's, or
	// one of a binary op's two) is a transposed view, in 32×32 tiles;
	// ewise picks it for that layout.
	t string
}

// coalesce orders the dimensions of an elementwise space by the first
// operand's (the destination's) strides, largest first, and then merges
// them (merge). An elementwise op maps each element on its own, so any
// order of the dimensions gives the same result, provided every operand's
// strides move with them; ordering them as the destination lies in memory
// makes neighbouring threads write neighbouring addresses. A space whose
// operands all share one dense layout, such as channels-last [N, C, H, W]
// tensors with strides [H·W·C, 1, W·C, C], becomes one dimension of stride
// 1 and takes the contiguous kernel. Ties (equal destination strides, as
// along dimensions it broadcasts) are broken by the other operands'
// strides in turn, and otherwise keep the logical order. A first operand
// with a zero stride (a scatter's destination, which many elements add
// into) keeps the logical order, which its kernels are laid out for.
func coalesce(shape []int, strides [][]int) ([]int, [][]int) {
	perm := make([]int, 0, len(shape))
	for dim, n := range shape {
		if n != 1 {
			if len(strides) == 0 || strides[0][dim] == 0 {
				return merge(shape, strides)
			}
			perm = append(perm, dim)
		}
	}
	abs := func(x int) int {
		if x < 0 {
			return -x
		}
		return x
	}
	slices.SortStableFunc(perm, func(i, j int) int {
		for _, st := range strides {
			if a, b := abs(st[i]), abs(st[j]); a != b {
				return cmp.Compare(b, a)
			}
		}
		return 0
	})
	ps := make([]int, len(perm))
	pst := make([][]int, len(strides))
	for k, st := range strides {
		pst[k] = make([]int, len(perm))
		for i, dim := range perm {
			pst[k][i] = st[dim]
		}
	}
	for i, dim := range perm {
		ps[i] = shape[dim]
	}
	return merge(ps, pst)
}

// ewise launches an elementwise kernel over shape. pre appends the
// kernel's leading arguments (pointers, scalars) given the operands'
// addresses; ewise then appends n and either the vector flag (contiguous
// kernel) or the strided space. The context must be current.
func (d *queue) ewise(k ewKernel, shape []int, ops []ewOp, pre func(a *cuda.KernelArgs, ptrs []cuda.DevicePtr)) error {
	strides := make([][]int, len(ops))
	for i, o := range ops {
		strides[i] = o.strides
	}
	ms, mst := coalesce(shape, strides)
	n := int64(1)
	for _, x := range ms {
		n *= int64(x)
	}
	if n == 0 {
		return nil
	}
	ptrs := make([]cuda.DevicePtr, len(ops))
	for i, o := range ops {
		ptrs[i] = o.ptr
	}
	contiguous := k.c != ""
	for _, st := range mst {
		if len(st) > 1 || len(st) == 1 && st[0] != 1 {
			contiguous = false
		}
	}
	if contiguous {
		f, err := d.function(k.key, k.c)
		if err != nil {
			return err
		}
		vec := vec4(ops, ptrs)
		a := d.getArgs()
		defer d.putArgs(a)
		pre(a, ptrs)
		a.Int64(n).Int32(vec)
		return d.launch(f, d.grid(vecUnits(n, vec)), a)
	}
	if inner, bca, ok := rowBroadcast(k, ms, mst); ok {
		f, err := d.function(k.key, k.r)
		if err != nil {
			return err
		}
		vec := vec4(ops, ptrs)
		if inner%4 != 0 {
			vec = 0
		}
		a := d.getArgs()
		defer d.putArgs(a)
		pre(a, ptrs)
		a.Int64(n).Int64(int64(inner)).Int32(vec).Int32(bca)
		return d.launch(f, d.grid(vecUnits(n, vec)), a)
	}
	if rows, cols, bta, ok := transposedPair(k, ms, mst); ok {
		f, err := d.function(k.key, k.t)
		if err != nil {
			return err
		}
		a := d.getArgs()
		defer d.putArgs(a)
		pre(a, ptrs)
		a.Int64(int64(rows)).Int64(int64(cols))
		if len(ops) == 3 {
			a.Int32(bta)
		}
		tiles := int64((rows+31)/32) * int64((cols+31)/32)
		return d.launch(f, uint32(max(1, min(tiles, int64(d.sms*blocksPerSM)))), a)
	}
	f, err := d.function(k.key, k.s)
	if err != nil {
		return err
	}
	return d.stridedLaunch(f, ms, mst, ops, ptrs, pre)
}

// vec4 returns 1 when every operand's address is aligned to 4 of its
// elements, so that a kernel may move 4 elements per access, else 0.
func vec4(ops []ewOp, ptrs []cuda.DevicePtr) int32 {
	for i, o := range ops {
		if uint64(ptrs[i])%uint64(4*o.size) != 0 {
			return 0
		}
	}
	return 1
}

// vecUnits is the number of work units of n elements: groups of 4 when
// vec is set.
func vecUnits(n int64, vec int32) int64 {
	if vec != 0 {
		return (n + 3) / 4
	}
	return n
}

// rowBroadcast reports whether the merged space (ms, mst) of a binary
// kernel with a row-broadcast form is dst and one input contiguous [R, N]
// and the other input a contiguous vector [N] repeated R times; it returns
// N and which input is the vector (1: a, 0: b).
func rowBroadcast(k ewKernel, ms []int, mst [][]int) (inner int, bca int32, ok bool) {
	if k.r == "" || len(ms) != 2 || len(mst) != 3 {
		return 0, 0, false
	}
	full := func(st []int) bool { return st[0] == ms[1] && st[1] == 1 }
	vector := func(st []int) bool { return st[0] == 0 && st[1] == 1 }
	switch {
	case !full(mst[0]):
		return 0, 0, false
	case full(mst[1]) && vector(mst[2]):
		return ms[1], 0, true
	case vector(mst[1]) && full(mst[2]):
		return ms[1], 1, true
	}
	return 0, 0, false
}

// transposedPair reports whether the merged space (ms, mst) of a kernel
// with a tiled form is [R, C] with dst row-major and its input (a copy) or
// one of its two inputs (a binary op) column-major, the other row-major;
// it returns R, C and, for two inputs, which one is column-major (1: a, 0:
// b). Small spaces keep the strided kernel.
func transposedPair(k ewKernel, ms []int, mst [][]int) (rows, cols int, bta int32, ok bool) {
	if k.t == "" || len(ms) != 2 || len(mst) < 2 || len(mst) > 3 || ms[0] < 32 || ms[1] < 32 {
		return 0, 0, 0, false
	}
	rowMajor := func(st []int) bool { return st[0] == ms[1] && st[1] == 1 }
	colMajor := func(st []int) bool { return st[0] == 1 && st[1] == ms[0] }
	switch {
	case !rowMajor(mst[0]):
		return 0, 0, 0, false
	case len(mst) == 2:
		return ms[0], ms[1], 0, colMajor(mst[1])
	case rowMajor(mst[1]) && colMajor(mst[2]):
		return ms[0], ms[1], 0, true
	case colMajor(mst[1]) && rowMajor(mst[2]):
		return ms[0], ms[1], 1, true
	}
	return 0, 0, 0, false
}

// stridedLaunch launches f over the merged space (ms, mst), splitting the
// outermost dimensions on the host while there are more than maxDims.
func (d *queue) stridedLaunch(f cuda.Function, ms []int, mst [][]int, ops []ewOp, ptrs []cuda.DevicePtr,
	pre func(a *cuda.KernelArgs, ptrs []cuda.DevicePtr)) error {
	if len(ms) > maxDims {
		inner := make([][]int, len(mst))
		for k := range mst {
			inner[k] = mst[k][1:]
		}
		sub := make([]cuda.DevicePtr, len(ptrs))
		for i := range ms[0] {
			for k, o := range ops {
				sub[k] = ptrs[k] + cuda.DevicePtr(int64(i)*int64(mst[k][0])*int64(o.size))
			}
			if err := d.stridedLaunch(f, ms[1:], inner, ops, sub, pre); err != nil {
				return err
			}
		}
		return nil
	}
	n := int64(1)
	for _, x := range ms {
		n *= int64(x)
	}
	a := d.getArgs()
	defer d.putArgs(a)
	pre(a, ptrs)
	a.Int64(n)
	addIdx(a, n, ms, mst)
	return d.launch(f, d.grid((n+unroll-1)/unroll), a)
}

// run enters the device, runs fn and exits; it is the frame of every op.
func (d *Device) run(fn func() error) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	return fn()
}

// Precompile compiles (or reads from the disk cache) and loads every
// kernel module that the ops can use, in parallel on all CPUs, so that no
// op pays for compilation later. It takes seconds when the cache is cold.
func (d *Device) Precompile() error {
	keys := allModules()
	if err := compileKeys(keys, d.arch); err != nil {
		return err
	}
	return d.run(func() error {
		var errs []error
		for _, k := range keys {
			if _, err := d.module(k); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// allModules lists the module of every op and dtype that the ops use.
func allModules() []modKey {
	var keys []modKey
	for _, op := range []string{"fill", "move", "where", "gather", "check"} {
		keys = append(keys, modKey{fam: famBytes, op: op})
	}
	for _, dt := range backend.DTypes {
		for _, to := range backend.DTypes {
			if to != dt {
				keys = append(keys, modKey{fam: famCopy, dt: dt, op: to.String()})
			}
		}
		for op := backend.UnaryOp(0); op <= backend.LogicalNot; op++ {
			if backend.UnaryDefined(op, dt) {
				keys = append(keys, modKey{fam: famUnary, dt: dt, op: op.String()})
			}
		}
		for op := range backend.BinaryOp(backend.NumBinaryOps) {
			if backend.BinaryDefined(op, dt) {
				keys = append(keys, modKey{fam: famBinary, dt: dt, op: op.String()})
			}
		}
		for op := backend.ReduceOp(0); op <= backend.ArgMin; op++ {
			keys = append(keys, modKey{fam: famReduce, dt: dt, op: op.String()})
		}
		keys = append(keys, modKey{fam: famScatter, dt: dt})
		if dt.IsFloat() {
			keys = append(keys, modKey{fam: famOptim, dt: dt, op: "adam"}, modKey{fam: famOptim, dt: dt, op: "sgd"}, modKey{fam: famOptim, dt: dt, op: "unscale"},
				modKey{fam: famQuant, dt: dt, op: "dequant"})
		}
		if dt == backend.Float32 || dt == backend.Float16 || dt == backend.BFloat16 {
			keys = append(keys, modKey{fam: famNorm, dt: dt, op: "bn"}, modKey{fam: famPool, dt: dt, op: "pool"})
		}
	}
	return keys
}

// begin is the start of every kernel what: it returns the queue of stream
// s once check, the verdict of package backend's argument check for the
// kernel, has passed.
func (dev *Device) begin(s backend.Stream, what string, check error) (*queue, error) {
	d, err := dev.on(s)
	if err != nil {
		return nil, err
	}
	if err := checked(what, check); err != nil {
		return nil, err
	}
	return d, nil
}

// checked returns err, the verdict of one of package backend's argument
// checks on the arguments of what, with the backend's name and what in
// front; nil stays nil.
func checked(what string, err error) error {
	if err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	return nil
}

// notImplemented returns an error wrapping backend.ErrNotImplemented.
func notImplemented(what string, dt backend.DType) error {
	return fmt.Errorf("cuda: %s on %s: %w", what, dt, backend.ErrNotImplemented)
}
