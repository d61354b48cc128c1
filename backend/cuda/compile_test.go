package cuda

import (
	"bytes"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/nvrtc"
)

// TestKernelsCompile compiles every kernel module with NVRTC alone, for
// Hopper (sm_90) and Ampere (sm_80; CUDA 13's NVRTC compiles nothing older
// than sm_75). It needs no GPU and skips where NVRTC is missing.
func TestKernelsCompile(t *testing.T) {
	if _, err := nvrtc.Load(); err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	useKernelCache(t, t.TempDir())
	for _, arch := range []int{90, 80} {
		if err := CompileAll(arch); err != nil {
			t.Fatalf("sm_%d: %v", arch, err)
		}
	}
}

// useKernelCache points the kernel cache at dir for one test, whether or
// not the options are fixed already (tests of one process share them).
func useKernelCache(t *testing.T, dir string) {
	options.mu.Lock()
	old := options.opts.KernelCache
	options.opts.KernelCache = dir
	options.mu.Unlock()
	t.Cleanup(func() {
		options.mu.Lock()
		options.opts.KernelCache = old
		options.mu.Unlock()
	})
}

// kernelNames returns the kernels that the ops look up in module k.
func kernelNames(k modKey) []string {
	var names []string
	widths := []int{1, 2, 4, 8}
	switch k.fam {
	case famBytes:
		switch k.op {
		case "fill", "move", "where":
			for _, w := range widths {
				n := widthNames[k.op][w]
				if k.op != "move" {
					names = append(names, n[0])
				} else {
					names = append(names, moveTiles[w])
				}
				names = append(names, n[1])
			}
		case "gather":
			for _, w := range widths {
				names = append(names, gatherNames[w])
			}
		case "check":
			names = append(names, "check_index")
		}
	case famCopy:
		dt, _ := backend.ParseDType(k.op)
		names = append(names, copyNames[dt][:]...)
		names = append(names, copyTiles[dt], "cp_"+dt.String()+"_multi")
	case famUnary:
		for op := backend.UnaryOp(0); op <= backend.LogicalNot; op++ {
			if op.String() == k.op {
				names = append(names, unaryNames[op][:]...)
			}
		}
	case famBinary:
		for op := range backend.BinaryOp(backend.NumBinaryOps) {
			if op.String() == k.op {
				names = append(names, binaryNames[op][0][:]...)
				names = append(names, binaryNames[op][1][:]...)
				names = append(names, binaryRows[op], binaryTiles[op])
				if !k.dt.IsFloat() {
					names = append(names, binaryNames[op][2][:]...)
				}
			}
		}
	case famReduce:
		for op := backend.ReduceOp(0); op <= backend.ArgMin; op++ {
			if op.String() == k.op {
				for _, g := range []int{0, 1, 32, 256} {
					names = append(names, reduceNames[op][g])
					if backend.WidensReduce(op, k.dt.OpMath(), k.dt) {
						names = append(names, wideNames[op][g])
					}
				}
			}
		}
	case famScatter:
		names = append(names, "scatter_add")
	case famOptim:
		names = append(names, k.op+"_step")
		if k.op == "sgd" {
			names = append(names, "sgd_multi")
		}
	case famQuant:
		names = append(names, "dequant_i8")
	case famNorm:
		for _, n := range []string{"bn_nhwc_stats", "bn_nhwc_apply", "bn_nhwc_bwd_stats", "bn_nhwc_bwd_apply"} {
			names = append(names, n, n+"2")
		}
		names = append(names, "bn_nhwc_finish", "bn_nhwc_bwd_finish")
	case famPool:
		for _, n := range []string{"pool_max", "pool_max_taps", "pool_max_arg", "pool_max_bwd", "pool_avg", "pool_avg_bwd"} {
			names = append(names, n, n+"2")
		}
	}
	return names
}

// TestModuleKernels compiles the module of every op and dtype, as devices
// do, and checks that each holds the kernels the ops look up. It needs
// NVRTC but no GPU.
func TestModuleKernels(t *testing.T) {
	if _, err := nvrtc.Load(); err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	useKernelCache(t, t.TempDir())
	keys := allModules()
	if err := compileKeys(keys, 90); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		img, err := cubin(k, 90)
		if err != nil {
			t.Fatal(err)
		}
		names := kernelNames(k)
		if len(names) == 0 {
			t.Errorf("%s: no kernel names", k)
		}
		for _, n := range names {
			if !bytes.Contains(img, []byte(n+"\x00")) {
				t.Errorf("%s: kernel %s missing", k, n)
			}
		}
	}
}
