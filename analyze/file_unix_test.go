//go:build unix

package analyze

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteFileKeepsWhatPathNames checks that writing the page or a
// recording to a path writes what the path names and leaves its kind
// alone: a symbolic link stays a link and the file it points to gets the
// content; a named pipe (or a device such as /dev/stdout) is written in
// place rather than replaced by a regular file; an existing file keeps
// its permissions.
func TestWriteFileKeepsWhatPathNames(t *testing.T) {
	const content = "<!doctype html>page\n"
	write := func(w io.Writer) error {
		_, err := io.WriteString(w, content)
		return err
	}
	tests := []struct {
		name string
		// setup makes what path names in dir and returns path and the
		// file the content must end up in.
		setup func(t *testing.T, dir string) (path, dest string)
		// kind is the mode type path must still have.
		kind fs.FileMode
		perm fs.FileMode // of dest, when it is a regular file
	}{
		{"new file", func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "run.html")
			return p, p
		}, 0, 0o644},
		{"existing file keeps its permissions", func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "run.html")
			if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, 0o600); err != nil {
				t.Fatal(err)
			}
			return p, p
		}, 0, 0o600},
		{"symbolic link to a file", func(t *testing.T, dir string) (string, string) {
			dest := filepath.Join(dir, "pages", "run.html")
			if err := os.Mkdir(filepath.Dir(dest), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dest, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, "latest.html")
			if err := os.Symlink(dest, link); err != nil {
				t.Fatal(err)
			}
			return link, dest
		}, fs.ModeSymlink, 0o644},
		{"dangling symbolic link", func(t *testing.T, dir string) (string, string) {
			dest := filepath.Join(dir, "run.html")
			link := filepath.Join(dir, "latest.html")
			if err := os.Symlink(dest, link); err != nil {
				t.Fatal(err)
			}
			return link, dest
		}, fs.ModeSymlink, 0o644},
		{"named pipe", func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "pipe")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skipf("no named pipes here: %v", err)
			}
			return p, ""
		}, fs.ModeNamedPipe, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path, dest := tc.setup(t, dir)
			got := make(chan string, 1)
			if dest == "" {
				// Read the pipe as the writer fills it.
				go func() {
					f, err := os.Open(path)
					if err != nil {
						got <- "open: " + err.Error()
						return
					}
					defer f.Close()
					b, _ := io.ReadAll(f)
					got <- string(b)
				}()
			}
			if err := writeFileAtomic(path, write); err != nil {
				t.Fatalf("writeFileAtomic: %v", err)
			}
			li, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if li.Mode().Type() != tc.kind {
				t.Fatalf("%s is now of mode %v, want type %v", path, li.Mode(), tc.kind)
			}
			var text string
			if dest == "" {
				text = <-got
			} else {
				b, err := os.ReadFile(dest)
				if err != nil {
					t.Fatal(err)
				}
				text = string(b)
				fi, err := os.Stat(dest)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != tc.perm {
					t.Errorf("%s has permissions %v, want %v", dest, fi.Mode().Perm(), tc.perm)
				}
			}
			if text != content {
				t.Errorf("wrote %q, want %q", text, content)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*", ".*")); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}
