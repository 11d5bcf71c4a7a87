// Package atomicfile writes a file so that readers see its old or its new content, never a part.
package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
)

// Write writes b to a temp file of its own in path's directory (mode 0644) and renames it to
// path: readers see the old or the new content, and writers of the same file on one volume never
// interleave. The temp file is removed on any failure.
func Write(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := errors.Join(f.Chmod(0o644), f.Close()); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
