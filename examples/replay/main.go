// Replay runs an allocation trace recorded from PyTorch (ResNet-50
// training on an H200) through vram's caching allocator under three
// settings, and prints how much memory each reserved for what the program
// asked: the fragmentation that makes "CUDA out of memory" appear with
// memory apparently free.
//
//	go run ./examples/replay [TRACE]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"
)

// defaultTraces are where the recorded trace lies, seen from the repository
// root ("go run ./examples/replay") and from this directory ("go run .").
var defaultTraces = []string{"examples/replay/testdata/resnet50_train.trace.gz", "testdata/resnet50_train.trace.gz"}

// defaultTrace returns the first of paths that exists, else the first one, so
// that the error names the path the documentation gives.
func defaultTrace(paths []string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return paths[0]
}

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: replay [TRACE]\n\nReplays an allocation trace (default %s) under three allocator settings.\n", defaultTraces[0])
	}
	flag.Parse()
	path, err := tracePath(flag.Args(), defaultTraces)
	if err != nil {
		fmt.Fprintln(os.Stderr, "replay:", err)
		flag.Usage()
		os.Exit(2)
	}
	if err := run(os.Stdout, path); err != nil {
		fmt.Fprintln(os.Stderr, "replay:", err)
		os.Exit(1)
	}
}

// tracePath returns the trace that args name, or the default one (see
// defaultTrace) when they name none; more than one is an error.
func tracePath(args, defaults []string) (string, error) {
	switch len(args) {
	case 0:
		return defaultTrace(defaults), nil
	case 1:
		return args[0], nil
	}
	return "", fmt.Errorf("%d traces %q: give at most one", len(args), args)
}

func run(w io.Writer, path string) error {
	f, err := trace.Open(path)
	if err != nil {
		return err
	}
	if f.Kind != trace.KindText {
		return fmt.Errorf("%s: want a text trace, got %v", path, f.Kind)
	}
	fmt.Fprintf(w, "%s: %d events\n", path, len(f.Events))
	fmt.Fprintf(w, "%-42s %14s %14s %8s %12s\n", "VRAM_ALLOC_CONF", "peak requested", "peak reserved", "ratio", "driver time")
	for _, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", "policy:vram"} {
		cfg, err := memory.ParseConfig(conf)
		if err != nil {
			return err
		}
		// An 80 GiB simulated device; the replay never touches a GPU.
		res, err := memory.Replay(f.Events, memory.NewSimArena(80<<30), cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-42s %10.2f GiB %10.2f GiB %8.3f %9.1f ms\n", conf,
			gib(res.PeakRequested), gib(res.PeakReserved),
			float64(res.PeakReserved)/float64(res.PeakRequested), float64(res.DriverTimeUS)/1000)
	}
	return nil
}

func gib(n int64) float64 { return float64(n) / (1 << 30) }
