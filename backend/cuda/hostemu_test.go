package cuda

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostCompiler returns g++'s path, common.cuh's text and the shim's
// directory for the tests that build kernels for the host; it skips the
// test when g++ is missing or in -short.
func hostCompiler(t *testing.T) (cxx string, common []byte, shim string) {
	t.Helper()
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++")
	}
	if testing.Short() {
		t.Skip("compiles C++: not in -short")
	}
	common, err = os.ReadFile("kernels/common.cuh")
	if err != nil {
		t.Fatal(err)
	}
	shim, err = filepath.Abs("testdata/hostemu")
	if err != nil {
		t.Fatal(err)
	}
	return cxx, common, shim
}

// TestKernelsOnHost compiles norm.cu, pool.cu, optim.cu and copy.cu for the host
// with g++ (testdata/hostemu/shim.h stands in for CUDA) and runs the
// programs beside the shim, which check the float32 batch-norm and pooling
// kernels against a float64 reference, sgd_multi against sgd_step, and
// the many-pair conversions of copy.cu to and from bfloat16 against the
// one-pair kernel. It checks the
// kernels' arithmetic and indexing on a machine without a GPU; it skips
// when g++ is missing.
func TestKernelsOnHost(t *testing.T) {
	cxx, common, shim := hostCompiler(t)
	const f32 = "#define VD DT_F32\n#define K_ALL\n"
	for _, tc := range []struct{ name, module, main, defines string }{
		{"norm", "kernels/norm.cu", "norm_main.cpp", f32},
		{"pool", "kernels/pool.cu", "pool_main.cpp", f32},
		// Tiles of 256 elements, so that the parameters span several.
		{"sgd", "kernels/optim.cu", "sgd_main.cpp", f32 + "#define SGD_TILE 256\n"},
		// Only the bfloat16 conversions, which need no inline PTX.
		{"copy to bf16", "kernels/copy.cu", "copy_main.cpp",
			"#define SD DT_F32\n#define K_bfloat16\n#define CP_TILE 256\n#define CP_DST DT_BF16\n#define CP_ONE cp_bfloat16_c\n#define CP_MULTI cp_bfloat16_multi\n"},
		{"copy from bf16", "kernels/copy.cu", "copy_main.cpp",
			"#define SD DT_BF16\n#define K_float32\n#define CP_TILE 256\n#define CP_DST DT_F32\n#define CP_ONE cp_float32_c\n#define CP_MULTI cp_float32_multi\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			module, err := os.ReadFile(tc.module)
			if err != nil {
				t.Fatal(err)
			}
			main, err := os.ReadFile(filepath.Join(shim, tc.main))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			src := filepath.Join(dir, "k.cpp")
			text := "#include \"shim.h\"\n" + tc.defines + string(common) + string(module) + string(main)
			if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(dir, "k")
			if out, err := exec.Command(cxx, "-std=c++20", "-O1", "-w", "-pthread", "-I", shim, src, "-o", bin).CombinedOutput(); err != nil {
				if strings.Contains(string(out), "barrier") && strings.Contains(string(out), "No such file") {
					t.Skipf("g++ lacks C++20's <barrier>: %s", out)
				}
				t.Fatalf("g++: %v\n%s", err, out)
			}
			out, err := exec.Command(bin).CombinedOutput()
			t.Logf("%s", out)
			if err != nil || !strings.Contains(string(out), "PASS") {
				t.Fatalf("%s: %v", tc.main, err)
			}
		})
	}
}

// TestSGDTileMatchesKernel checks that SGDSteps sizes sgd_multi's grid with
// the tile the kernel assumes and groups as many parameters as it takes,
// and that a launch's arguments fit a KernelArgs and the mask of first
// steps.
func TestSGDTileMatchesKernel(t *testing.T) {
	src, err := os.ReadFile("kernels/optim.cu")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("#define SGD_TILE %d\n", sgdTile), fmt.Sprintf("#define SGD_MAX %d\n", sgdMax)} {
		if !strings.Contains(string(src), want) {
			t.Fatalf("kernels/optim.cu lacks %q", want)
		}
	}
	if 8+4*sgdMax > maxKernelArgs || sgdMax > 64 {
		t.Fatalf("sgdMax %d: %d arguments a launch (room for %d), first-step mask of 64 bits", sgdMax, 8+4*sgdMax, maxKernelArgs)
	}
}

// TestKernelsParseOnHost has g++ check the syntax and types of the kernel
// modules that shim.h can stand in for, in float32, float16 and bfloat16
// (the half types' inline PTX is only parsed), so that a kernel edited
// without a GPU at hand is at least well-formed C++ in every dtype that
// runs it. It skips when g++ is missing.
func TestKernelsParseOnHost(t *testing.T) {
	cxx, common, shim := hostCompiler(t)
	for _, module := range []string{"norm", "pool", "optim", "unary", "binary", "bytes", "quant"} {
		src, err := os.ReadFile("kernels/" + module + ".cu")
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range []string{"DT_F32", "DT_F16", "DT_BF16"} {
			t.Run(module+"/"+dt, func(t *testing.T) {
				t.Parallel()
				text := "#include \"shim.h\"\n#define VD " + dt + "\n#define K_ALL\n" + string(common) + string(src) + "\nint main() {}\n"
				path := filepath.Join(t.TempDir(), "k.cpp")
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(cxx, "-std=c++20", "-fsyntax-only", "-w", "-I", shim, path).CombinedOutput()
				if err != nil {
					if strings.Contains(string(out), "barrier") && strings.Contains(string(out), "No such file") {
						t.Skipf("g++ lacks C++20's <barrier>: %s", out)
					}
					t.Fatalf("g++: %v\n%s", err, out)
				}
			})
		}
	}
}
