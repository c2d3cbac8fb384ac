package sink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// AtomicFile is a file that appears under its name only when committed:
// it is written to name+".tmp", and Commit syncs it, renames it over the
// name and syncs the directory so that the rename survives a crash; Abort
// removes it. Readers of the name never see a partial file. Create's file
// sinks and the model files of a training job are written this way.
type AtomicFile struct {
	path, tmp string
	file      *os.File
	done      bool
}

// CreateAtomic starts writing the file path.
func CreateAtomic(path string) (*AtomicFile, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &AtomicFile{path: path, tmp: tmp, file: f}, nil
}

// Write writes to the temporary file.
func (a *AtomicFile) Write(p []byte) (int, error) { return a.file.Write(p) }

// Commit makes the written bytes the content of the path. On failure the
// temporary file is removed. Committing or aborting twice is a no-op.
func (a *AtomicFile) Commit() error {
	if a.done {
		return nil
	}
	a.done = true
	if err := a.commit(); err != nil {
		return errors.Join(fmt.Errorf("commit %s: %w", a.path, err), a.removeTmp())
	}
	return nil
}

func (a *AtomicFile) commit() error {
	if err := a.file.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync: %w", err), a.file.Close())
	}
	if err := a.file.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err := os.Rename(a.tmp, a.path); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	return syncDir(filepath.Dir(a.path))
}

// Abort drops what was written: nothing appears under the path.
func (a *AtomicFile) Abort() error {
	if a.done {
		return nil
	}
	a.done = true
	return errors.Join(a.file.Close(), a.removeTmp())
}

// removeTmp deletes the temporary file unless the rename already moved it.
func (a *AtomicFile) removeTmp() error {
	if err := os.Remove(a.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	if err := d.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync directory: %w", err), d.Close())
	}
	return d.Close()
}
