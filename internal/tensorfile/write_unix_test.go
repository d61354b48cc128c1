//go:build unix

package tensorfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vramgo/vram/internal/safetensors"
)

// TestWriteRefusesNonRegular checks that Write refuses a path that names
// something other than a regular file (a directory, a named pipe, a device
// such as /dev/null), which its rename would otherwise replace with a
// regular file, and leaves it and its directory as they were.
func TestWriteRefusesNonRegular(t *testing.T) {
	tests := []struct {
		name string
		make func(path string) error
		want string
	}{
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, "is a directory"},
		{"named pipe", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "not a regular file"},
		{"link to a directory", func(p string) error {
			if err := os.Mkdir(p+"-target", 0o755); err != nil {
				return err
			}
			return os.Symlink(filepath.Base(p)+"-target", p)
		}, "is a directory"},
	}
	tensors := map[string]safetensors.Tensor{"x": {DType: "U8", Shape: []int{1}, Data: []byte{1}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "model.safetensors")
			if err := tt.make(path); err != nil {
				t.Fatal(err)
			}
			before, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			entries, _ := os.ReadDir(dir)
			err = Write(path, tensors, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want one naming %s and saying %q", err, path, tt.want)
			}
			after, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if after.Mode() != before.Mode() {
				t.Errorf("mode %v, was %v: Write replaced it", after.Mode(), before.Mode())
			}
			if again, _ := os.ReadDir(dir); len(again) != len(entries) {
				t.Errorf("directory holds %d entries, held %d: a temporary file was left", len(again), len(entries))
			}
		})
	}
}
