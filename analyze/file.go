package analyze

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// writeFileAtomic writes a file through write. A regular file, new or
// existing, is written into a temporary file in the same directory and
// renamed over path, so that readers never see a half-written file; one
// that exists keeps its permissions. A symbolic link is followed: what it
// points to is written and the link stays. Anything else that exists at
// path (a device such as /dev/stdout or /dev/null, a named pipe) is
// written in place: a rename would replace it with a regular file.
func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	if path == "" {
		return errors.New("no file name to write to")
	}
	defer func() {
		if err != nil {
			// Name the file asked for, not the temporary one.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	target := path
	if li, err := os.Lstat(path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		resolved, err := filepath.EvalSymlinks(path)
		if err != nil {
			// A dangling link, or one into /proc that names no file
			// (/dev/stdout to a pipe): opening it follows the link.
			return writeInPlace(path, write)
		}
		target = resolved
	}
	perm := fs.FileMode(0o644)
	fi, err := os.Stat(target)
	switch {
	case err == nil && fi.IsDir():
		return errors.New("is a directory")
	case err == nil && !fi.Mode().IsRegular():
		return writeInPlace(target, write)
	case err == nil:
		perm = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriter(tmp)
	if err := write(bw); err != nil {
		tmp.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), target)
}

// writeInPlace writes path through write by opening it for writing,
// truncated, created if missing.
func writeInPlace(path string, write func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	if err := write(bw); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
