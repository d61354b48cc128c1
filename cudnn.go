package vram

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vramgo/vram/backend/cuda"
)

// CuDNNSettings are the switches of cuDNN, which CUDA devices use for
// convolutions, pooling and batch normalization when libcudnn.so.9 is
// found (vram doctor says whether it is); they are process-wide, as
// PyTorch's torch.backends.cudnn flags are. The zero value is PyTorch's
// default. Set them with [SetCuDNN] at any time, or with Config.CuDNN.
type CuDNNSettings struct {
	// Disabled turns cuDNN off (torch.backends.cudnn.enabled = False):
	// convolutions, pooling and batch norm are composed from vram's own
	// kernels and cuBLASLt, as on a machine without cuDNN.
	Disabled bool
	// Benchmark times every convolution algorithm once per shape,
	// parameters, dtype and memory format, and keeps the fastest
	// (torch.backends.cudnn.benchmark = True). It pays off when the shapes
	// repeat from step to step; when they change every step, each new
	// shape pays for a search ([CuDNNStatistics] counts them).
	Benchmark bool
	// Deterministic keeps to algorithms whose results are bit-identical
	// from run to run (torch.backends.cudnn.deterministic = True). A
	// convolution that has none falls back to the composed path.
	Deterministic bool
	// NoTF32 keeps float32 convolutions off TF32 tensor cores
	// (torch.backends.cudnn.allow_tf32 = False).
	NoTF32 bool
	// NoGraphAPI keeps convolutions on cuDNN's legacy API instead of
	// trying its graph API first, which PyTorch uses (through
	// cudnn-frontend) and whose engines are faster for half-precision
	// channels-last convolutions. A convolution whose graph plan cannot
	// be built or run takes the legacy API by itself.
	NoGraphAPI bool
	// BenchmarkLimit bounds how many of cuDNN's engine configurations
	// Benchmark times for one convolution
	// (torch.backends.cudnn.benchmark_limit): 0 means the default,
	// 10 as in PyTorch; a negative value times every configuration the
	// heuristics and cuDNN's fallback list offer (PyTorch's 0). More
	// candidates make the first step's search longer and may find a
	// faster algorithm.
	BenchmarkLimit int
}

// String lists the switches that are set, e.g. "benchmark,deterministic";
// "default" for none. [Config.CuDNN]'s variable VRAM_CUDNN takes the same
// words.
func (s CuDNNSettings) String() string {
	var w []string
	for _, f := range []struct {
		on   bool
		word string
	}{{s.Disabled, "off"}, {s.Benchmark, "benchmark"}, {s.Deterministic, "deterministic"}, {s.NoTF32, "notf32"}, {s.NoGraphAPI, "nograph"}} {
		if f.on {
			w = append(w, f.word)
		}
	}
	if s.BenchmarkLimit != 0 {
		w = append(w, fmt.Sprintf("benchmark_limit=%d", s.BenchmarkLimit))
	}
	if len(w) == 0 {
		return "default"
	}
	return strings.Join(w, ",")
}

// parseCuDNN reads VRAM_CUDNN: words separated by commas, each one of off,
// benchmark, deterministic, notf32, nograph and benchmark_limit=N, or
// default (none of them).
func parseCuDNN(v string) (CuDNNSettings, error) {
	var s CuDNNSettings
	for _, w := range strings.Split(v, ",") {
		word := strings.ToLower(strings.TrimSpace(w))
		if n, ok := strings.CutPrefix(word, "benchmark_limit="); ok {
			l, err := strconv.Atoi(n)
			if err != nil {
				return s, fmt.Errorf("benchmark_limit=%s: the limit must be an integer (0 for the default, negative for every configuration)", n)
			}
			s.BenchmarkLimit = l
			continue
		}
		switch word {
		case "", "default", "on":
		case "off":
			s.Disabled = true
		case "benchmark":
			s.Benchmark = true
		case "deterministic":
			s.Deterministic = true
		case "notf32":
			s.NoTF32 = true
		case "nograph":
			s.NoGraphAPI = true
		default:
			return s, fmt.Errorf("%q is not one of off, benchmark, deterministic, notf32, nograph, benchmark_limit=N and default (separate several with commas)", strings.TrimSpace(w))
		}
	}
	return s, nil
}

// SetCuDNN sets the cuDNN switches for the operations queued after it
// returns. It is safe for concurrent use; PyTorch programs flip
// cudnn.benchmark at run time, and so may this. The algorithms chosen
// under one setting are kept for when it comes back. The last of
// SetCuDNN and [Configure] (Config.CuDNN) wins; VRAM_CUDNN, which a
// program that never calls Configure has read at the first use of a
// device, does not undo an earlier SetCuDNN.
func SetCuDNN(s CuDNNSettings) {
	cudnnByCall.Store(true)
	cuda.SetCuDNN(cuda.CuDNNSettings(s))
}

// cudnnByCall records that SetCuDNN was called.
var cudnnByCall atomic.Bool

// CuDNN returns the switches in force.
func CuDNN() CuDNNSettings { return CuDNNSettings(cuda.CuDNN()) }

// CuDNNStats counts what choosing cuDNN's convolution algorithms cost,
// summed over the process's GPUs since it started.
type CuDNNStats struct {
	// Searches counts the timed searches of benchmark mode: one per
	// convolution shape and direction (forward, input gradient, filter
	// gradient), the first time it runs in that mode.
	Searches int64
	// SearchTime is the time the searches took: what benchmark mode adds
	// to the first step of each shape.
	SearchTime time.Duration
	// Heuristics counts the heuristic queries made outside benchmark mode,
	// one per shape and direction.
	Heuristics int64
	// Fallbacks counts the calls that cuDNN did not take (off, absent, or
	// a layout, dtype or shape it lacks), which were composed instead.
	Fallbacks int64
}

// CuDNNStatistics returns the counts of cuDNN's algorithm choices.
func CuDNNStatistics() CuDNNStats { return CuDNNStats(cuda.CuDNNStatistics()) }

// CuDNNVersion loads cuDNN and returns its version, as "9.6.0", or an
// error that says why it is not there and what to install; convolutions
// then use the composed path.
func CuDNNVersion() (string, error) {
	v, err := cuda.CuDNNVersion()
	if err != nil {
		return "", &Error{Op: "cudnn version", Kind: ErrUnavailable, Detail: "cuDNN 9 not loadable; convolutions use vram's composed kernels", Err: err}
	}
	return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100), nil
}
