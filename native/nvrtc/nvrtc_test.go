package nvrtc

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/vramgo/vram/native/internal/bindtest"
	"github.com/vramgo/vram/native/internal/cudatest"
)

func TestBindingTable(t *testing.T) {
	bindtest.Table(t, bindings, nil)
}

// TestSymbolsNamed checks that every wrapper reports the C symbol of the
// binding it calls.
func TestSymbolsNamed(t *testing.T) {
	bindtest.Uses(t, bindings, map[string]string{"call": libName}, "call", "check", "GetErrorString")
}

// TestNotLoaded checks that every wrapper fails with ErrNotLoaded, instead
// of calling through a nil function, before Load.
func TestNotLoaded(t *testing.T) {
	if compiler.Ready() {
		t.Skip("NVRTC is loaded")
	}
	bindtest.NotLoaded(t, ErrNotLoaded, []any{
		Version, CreateProgram, DestroyProgram, CompileProgram, GetProgramLogSize, GetProgramLog,
		GetCUBINSize, GetCUBIN, GetPTXSize, GetPTX,
	}, "Load")
	if GetErrorString(6) != "" {
		t.Error("GetErrorString before Load is not empty")
	}
}

func TestErrors(t *testing.T) {
	bindtest.Errors[Result, *Error](t, "nvrtc", check, Success, ErrInternalError, false, []bindtest.ErrorCase[Result]{
		{Code: 6, Name: "NVRTC_ERROR_COMPILATION", Sentinel: ErrCompilation},
		{Code: 5, Name: "NVRTC_ERROR_INVALID_OPTION", Sentinel: ErrInvalidOption},
		{Code: 1, Name: "NVRTC_ERROR_OUT_OF_MEMORY", Sentinel: ErrOutOfMemory},
		{Code: 11, Name: "NVRTC_ERROR_INTERNAL_ERROR", Sentinel: ErrInternalError},
		{Code: 99, Name: "NVRTC_ERROR_99"},
	})
	if got := check("nvrtcCompileProgram", 6).Error(); got != "nvrtc: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6)" {
		t.Errorf("message %q", got)
	}
}

// TestResultNamesUnique guards the checked-in table against copy slips.
func TestResultNamesUnique(t *testing.T) {
	bindtest.Names(t, resultNames, "NVRTC_")
}

const axpy = `extern "C" __global__ void axpy(float a, const float* x, float* y, unsigned long long n) {
	unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + y[i];
}`

// requireNVRTC loads NVRTC or skips (fails with VRAM_REQUIRE_CUDA=1). It
// needs no GPU.
func requireNVRTC(t *testing.T) {
	t.Helper()
	if _, err := Load(); err != nil {
		cudatest.SkipOrFail(t, "no NVRTC: %v", err)
	}
}

// TestCompile calls every binding: version, create, compile for a real
// and a virtual architecture, CUBIN, PTX, log, destroy, error string.
func TestCompile(t *testing.T) {
	requireNVRTC(t)
	major, minor, err := Version()
	if err != nil || major < 12 {
		t.Fatalf("nvrtcVersion: %d.%d, %v", major, minor, err)
	}
	t.Logf("NVRTC %d.%d from %s", major, minor, compiler.Library().Path)

	p, err := CreateProgram(axpy, "axpy.cu", []string{"#define SCALE 2\n"}, []string{"scale.h"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := DestroyProgram(p); err != nil {
			t.Error(err)
		}
	}()
	if err := CompileProgram(p, []string{"-arch=sm_80", "--std=c++17"}); err != nil {
		log, _ := GetProgramLog(p)
		t.Fatalf("%v\n%s", err, log)
	}
	cubin, err := GetCUBIN(p)
	if err != nil || !bytes.HasPrefix(cubin, []byte("\x7fELF")) {
		t.Fatalf("CUBIN: %d bytes, %v", len(cubin), err)
	}
	ptx, err := GetPTX(p)
	if err != nil || !bytes.Contains(ptx, []byte(".entry axpy")) || ptx[len(ptx)-1] != 0 {
		t.Fatalf("PTX: %v\n%.300s", err, ptx)
	}
	if _, err := GetProgramLog(p); err != nil {
		t.Error(err)
	}

	virt, err := CreateProgram(axpy, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer DestroyProgram(virt)
	if err := CompileProgram(virt, []string{"-arch=compute_80"}); err != nil {
		t.Fatal(err)
	}
	if n, err := GetCUBINSize(virt); err != nil || n != 0 {
		t.Errorf("CUBIN size for a virtual architecture: %d, %v", n, err)
	}
	if GetErrorString(6) == "" {
		t.Error("empty nvrtcGetErrorString")
	}
}

func TestCompileErrors(t *testing.T) {
	requireNVRTC(t)
	tests := []struct {
		name    string
		src     string
		opts    []string
		want    error
		wantLog string
	}{
		{"syntax error", "extern \"C\" __global__ void k() { int x = ; }", nil, ErrCompilation, "error"},
		{"bad option", axpy, []string{"--no-such-option"}, ErrInvalidOption, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := CreateProgram(tc.src, "bad.cu", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer DestroyProgram(p)
			err = CompileProgram(p, tc.opts)
			var e *Error
			if !errors.Is(err, tc.want) || !errors.As(err, &e) || e.Func != "nvrtcCompileProgram" {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			log, _ := GetProgramLog(p)
			if !strings.Contains(log, tc.wantLog) {
				t.Errorf("log lacks %q:\n%s", tc.wantLog, log)
			}
		})
	}
}
