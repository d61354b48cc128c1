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

// writeFileAtomic writes a file through write into a temporary file in
// the same directory and renames it over path, so that readers never see
// a half-written file.
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
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return errors.New("is a directory")
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
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
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
