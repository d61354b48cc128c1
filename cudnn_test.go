package vram

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/vramgo/vram/backend/cuda"
)

func TestParseCuDNN(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want CuDNNSettings
		err  string
	}{
		{"", CuDNNSettings{}, ""},
		{"default", CuDNNSettings{}, ""},
		{"on", CuDNNSettings{}, ""},
		{"off", CuDNNSettings{Disabled: true}, ""},
		{"benchmark", CuDNNSettings{Benchmark: true}, ""},
		{" Benchmark , deterministic ", CuDNNSettings{Benchmark: true, Deterministic: true}, ""},
		{"notf32,benchmark", CuDNNSettings{Benchmark: true, NoTF32: true}, ""},
		{"off,benchmark,deterministic,notf32", CuDNNSettings{Disabled: true, Benchmark: true, Deterministic: true, NoTF32: true}, ""},
		{"nograph,benchmark", CuDNNSettings{Benchmark: true, NoGraphAPI: true}, ""},
		{"benchmark,,", CuDNNSettings{Benchmark: true}, ""},
		{"benchmark,benchmark_limit=32", CuDNNSettings{Benchmark: true, BenchmarkLimit: 32}, ""},
		{"benchmark_limit=-1,benchmark", CuDNNSettings{Benchmark: true, BenchmarkLimit: -1}, ""},
		{"benchmark_limit=ten", CuDNNSettings{}, "the limit must be an integer"},
		{"fast", CuDNNSettings{}, `"fast" is not one of off, benchmark`},
		{"benchmark,tf32", CuDNNSettings{Benchmark: true}, `"tf32" is not one of`},
	} {
		got, err := parseCuDNN(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if back, err := parseCuDNN(got.String()); err != nil || back != got {
			t.Errorf("%q: String() %q reads back as %+v, %v", tc.in, got.String(), back, err)
		}
	}
}

func TestCuDNNFromEnvironment(t *testing.T) {
	cfg, err := ConfigFromLookup(lookupMap(map[string]string{EnvCuDNN: "benchmark,notf32"}))
	if err != nil || cfg.CuDNN != (CuDNNSettings{Benchmark: true, NoTF32: true}) {
		t.Errorf("VRAM_CUDNN=benchmark,notf32: %+v, %v", cfg.CuDNN, err)
	}
	_, err = ConfigFromLookup(lookupMap(map[string]string{EnvCuDNN: "quick"}))
	var ee *EnvError
	if !errors.As(err, &ee) || ee.Var != EnvCuDNN || !strings.Contains(err.Error(), `VRAM_CUDNN="quick"`) {
		t.Errorf("VRAM_CUDNN=quick: %v, want an *EnvError naming the variable", err)
	}
	co, _ := backendOptions(Config{CuDNN: CuDNNSettings{Deterministic: true}})
	if co.CuDNN != (cuda.CuDNNSettings{Deterministic: true}) {
		t.Errorf("cuda options %+v: Config.CuDNN not passed on", co.CuDNN)
	}
	if (Config{CuDNN: CuDNNSettings{Benchmark: true}}).equal(Config{}) {
		t.Error("configurations that differ in CuDNN compare equal")
	}
}

// TestSetCuDNNConcurrent flips the switches from several goroutines while
// others read them (run with -race): every read is one of the values set.
func TestSetCuDNNConcurrent(t *testing.T) {
	defer SetCuDNN(CuDNN())
	vals := []CuDNNSettings{{}, {Benchmark: true}, {Benchmark: true, Deterministic: true}, {Disabled: true}, {NoTF32: true}}
	ok := map[CuDNNSettings]bool{}
	for _, v := range vals {
		ok[v] = true
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				if g%2 == 0 {
					SetCuDNN(vals[(g+i)%len(vals)])
				} else if got := CuDNN(); !ok[got] {
					t.Errorf("read %+v, never set", got)
					return
				}
			}
		}()
	}
	wg.Wait()
	SetCuDNN(CuDNNSettings{Benchmark: true, Deterministic: true})
	if got := CuDNN(); got != (CuDNNSettings{Benchmark: true, Deterministic: true}) {
		t.Errorf("CuDNN() = %+v after setting benchmark and deterministic", got)
	}
	if got := cuda.CuDNN(); got != (cuda.CuDNNSettings{Benchmark: true, Deterministic: true}) {
		t.Errorf("the cuda backend holds %+v", got)
	}
}

// TestSetCuDNNBeforeFirstUse checks that the environment, read at the
// first use of a device in a program that never called Configure, does not
// undo a SetCuDNN made before, and applies otherwise.
func TestSetCuDNNBeforeFirstUse(t *testing.T) {
	oldCall, oldSettings := cudnnByCall.Load(), CuDNN()
	defer func() {
		cudnnByCall.Store(oldCall)
		SetCuDNN(oldSettings)
		cudnnByCall.Store(oldCall)
	}()
	for _, byCall := range []bool{false, true} {
		var applied Config
		s := &configState{
			apply:  func(c Config) error { applied = c; return nil },
			lookup: lookupMap(map[string]string{EnvCuDNN: "deterministic"}),
			warn:   func(string, ...any) {},
		}
		cudnnByCall.Store(false)
		if byCall {
			SetCuDNN(CuDNNSettings{Benchmark: true})
		}
		s.fix("a test used sim:0")
		want := CuDNNSettings{Deterministic: true}
		if byCall {
			want = CuDNNSettings{Benchmark: true}
		}
		if applied.CuDNN != want {
			t.Errorf("SetCuDNN before first use %v: %+v applied, want %+v", byCall, applied.CuDNN, want)
		}
	}
}
