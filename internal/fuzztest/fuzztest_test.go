package fuzztest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEncode(t *testing.T) {
	got := string(Encode([]byte("a\x00\"\n"), "ü", true, int64(-3), byte('x')))
	want := "go test fuzz v1\n[]byte(\"a\\x00\\\"\\n\")\nstring(\"ü\")\nbool(true)\nint64(-3)\nbyte('x')\n"
	if got != want {
		t.Fatalf("Encode = %q, want %q", got, want)
	}
}

func TestLongestArg(t *testing.T) {
	tests := []struct {
		file string
		want int
	}{
		{"go test fuzz v1\n[]byte(\"\\x00\\x01\\xff\")\nbool(true)\n", 3},
		{"go test fuzz v1\nstring(\"abc\")\n[]byte(\"a\")\n", 3},
		{"go test fuzz v1\nint64(5)\n", 0},
		{"go test fuzz v1\n[]byte(\"unterminated)\n", -1},
	}
	for _, tc := range tests {
		if got := longestArg([]byte(tc.file)); got != tc.want {
			t.Errorf("longestArg(%q) = %d, want %d", tc.file, got, tc.want)
		}
	}
}

// recorder is a testing.TB that records failures instead of stopping.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(string, ...any)     { r.failed = true }
func (r *recorder) Fatalf(f string, a ...any) { r.failed = true; panic(r) }
func (r *recorder) Fatal(a ...any)            { r.failed = true; panic(r) }

// check runs Check and reports whether it failed.
func check(t *testing.T, seeds []Seed, maxLen int) (failed bool) {
	r := &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	Check(r, "FuzzX", seeds, maxLen)
	return false
}

func TestCheck(t *testing.T) {
	t.Chdir(t.TempDir())
	seeds := []Seed{{Name: "a", Args: []any{[]byte("hello")}}, {Name: "b", Args: []any{"s", true}}}
	if !check(t, seeds, 0) {
		t.Fatal("Check passed without the seed files")
	}
	*update = true
	failed := check(t, seeds, 0)
	*update = false
	if failed || check(t, seeds, 0) {
		t.Fatal("Check failed after writing the seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzX")
	// A found input may be added; a stale or changed seed may not.
	if err := os.WriteFile(filepath.Join(dir, "0123abcd"), Encode([]byte("found")), 0o644); err != nil {
		t.Fatal(err)
	}
	if check(t, seeds, 0) {
		t.Fatal("Check failed with a found input beside the seeds")
	}
	if !check(t, seeds[:1], 0) {
		t.Fatal("Check passed with a stale seed file")
	}
	if !check(t, []Seed{{Name: "a", Args: []any{[]byte("changed")}}, seeds[1]}, 0) {
		t.Fatal("Check passed with a changed seed")
	}
	if !check(t, seeds, 4) {
		t.Fatal("Check passed with inputs over the bound")
	}
	if !check(t, []Seed{seeds[0], seeds[0]}, 0) {
		t.Fatal("Check passed with two seeds of one name")
	}
}
