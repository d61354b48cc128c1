// Package fuzztest holds what vram's fuzz targets share: their seed
// corpora and a bound on the memory an execution may allocate.
//
// Seed corpora are the files under a package's testdata/fuzz/FuzzName
// directory, in the "go test fuzz v1" format that `go test` reads: Go runs
// every such file as a seed in a plain `go test` and starts fuzzing from
// them with -fuzz. Each package with fuzz targets has a TestFuzzSeeds that
// builds its seeds in code (from realistic inputs: small snapshots, traces,
// pickles, allocator operation sequences, settings) and calls [Check],
// which fails when the committed files differ from what the code builds.
// Run the tests with -update-fuzz-seeds to rewrite them:
//
//	go test ./memory/... -run '^TestFuzzSeeds$' -update-fuzz-seeds
//
// Seed files are named "seed-NAME". Other files in the directories (inputs
// the fuzzer found, kept as regression tests) are left alone, but every
// file must respect the target's input bound, so that no seed makes the
// engine execute or minimise slowly.
package fuzztest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
)

// HeapAllocated returns the bytes allocated on the heap so far, a
// cumulative count that is cheap to read (no stop of the world): the
// difference across a call is what the call allocated, give or take the
// allocation caches of a few KiB per size class.
func HeapAllocated() uint64 {
	s := [1]metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s[:])
	return s[0].Value.Uint64()
}

// CheckAllocated fails t if what, run on n bytes of input, allocated more
// than fixed + perByte*n bytes since before (a HeapAllocated reading).
// Readers must allocate as the input's bytes arrive, never what a length
// or size field claims.
func CheckAllocated(t testing.TB, what string, n int, before uint64, fixed, perByte uint64) {
	t.Helper()
	if got, limit := HeapAllocated()-before, fixed+perByte*uint64(n); got > limit {
		t.Fatalf("%s of %d bytes allocated %d bytes (bound %d): memory must follow the input, not what it claims", what, n, got, limit)
	}
}

var update = flag.Bool("update-fuzz-seeds", false, "rewrite the seed files under testdata/fuzz")

// Seed is one corpus entry: its name (the file is "seed-"+Name) and the
// fuzz target's arguments, each a []byte, string, bool, int64 or byte.
type Seed struct {
	Name string
	Args []any
}

// Encode returns the corpus file holding args, in the format `go test`
// writes.
func Encode(args ...any) []byte {
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case string:
			fmt.Fprintf(&b, "string(%q)\n", v)
		case bool, int64:
			fmt.Fprintf(&b, "%T(%v)\n", v, v)
		case byte:
			fmt.Fprintf(&b, "byte(%q)\n", v)
		default:
			panic(fmt.Sprintf("fuzztest: unsupported argument type %T", a))
		}
	}
	return b.Bytes()
}

// Check compares the seed files of target, in testdata/fuzz/target of the
// current directory (the package under test), with seeds; with the
// -update-fuzz-seeds flag it writes them instead and removes stale ones.
// It also fails if any file of the directory holds an argument longer than
// maxLen bytes (the bound the target applies; 0 for none).
func Check(t testing.TB, target string, seeds []Seed, maxLen int) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	want := map[string][]byte{}
	for _, s := range seeds {
		name := "seed-" + s.Name
		if _, dup := want[name]; dup {
			t.Fatalf("%s: two seeds named %q", target, s.Name)
		}
		for _, a := range s.Args {
			if n := argLen(a); maxLen > 0 && n > maxLen {
				t.Fatalf("%s: seed %q has a %d-byte argument, over the target's bound of %d", target, s.Name, n, maxLen)
			}
		}
		want[name] = Encode(s.Args...)
	}
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
		for _, p := range old {
			if _, ok := want[filepath.Base(p)]; !ok {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%s: %v (run the test with -update-fuzz-seeds to write the seeds)", target, err)
	}
	have := map[string]bool{}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		switch n := longestArg(b); {
		case n < 0:
			t.Errorf("%s: not a corpus file of quoted arguments", p)
		case maxLen > 0 && n > maxLen:
			t.Errorf("%s: a %d-byte argument, over the target's bound of %d", p, n, maxLen)
		}
		if !strings.HasPrefix(e.Name(), "seed-") {
			continue
		}
		have[e.Name()] = true
		if w, ok := want[e.Name()]; !ok {
			t.Errorf("%s: stale seed file (run the test with -update-fuzz-seeds)", p)
		} else if !bytes.Equal(b, w) {
			t.Errorf("%s: differs from the seed the test builds (run the test with -update-fuzz-seeds)", p)
		}
	}
	for name := range want {
		if !have[name] {
			t.Errorf("%s: missing (run the test with -update-fuzz-seeds)", filepath.Join(dir, name))
		}
	}
}

// argLen is the length of a []byte or string argument, 0 for others.
func argLen(a any) int {
	switch v := a.(type) {
	case []byte:
		return len(v)
	case string:
		return len(v)
	}
	return 0
}

// longestArg returns the length of the longest quoted argument of a corpus
// file, or -1 if one cannot be read.
func longestArg(file []byte) int {
	n := 0
	for _, line := range strings.Split(string(file), "\n") {
		i, j := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
		if i < 0 || j < i || !strings.HasPrefix(line[i+1:], `"`) {
			continue
		}
		v, err := strconv.Unquote(line[i+1 : j])
		if err != nil {
			return -1
		}
		n = max(n, len(v))
	}
	return n
}
