package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/sink"
)

// File is a file a job reads or writes, named as its user gave it.
type File struct {
	// Role says what the file is to the job, in the words of an error
	// message: "input", "output", "rejects file", "model file", ...
	Role string
	Path string
}

func (f File) String() string { return f.Role + " " + f.Path }

// StoreWriteError reports a file a job would write into a model store's
// directory, which only the store writes: it could replace a version or
// leave the current model and its pointer disagreeing.
type StoreWriteError struct {
	Write File
	Store string
}

func (e *StoreWriteError) Error() string {
	return fmt.Sprintf("%s is in the model store %s, which only its store writes (train --model-dir, mvml models promote/rollback): write it elsewhere", e.Write, e.Store)
}

// SameFileError reports a file a job would write that is also a file it
// reads, or another file it writes: writing it would destroy the other.
type SameFileError struct {
	Write File
	Other File
}

func (e *SameFileError) Error() string {
	return fmt.Sprintf("%s is the same file as the %s: writing it would destroy that file", e.Write, e.Other)
}

// CheckFiles makes sure, before a job reads anything, that it can write
// its files without destroying any: no file of writes may be a file of
// reads or another file of writes (a *SameFileError), and each must be
// creatable: its directory exists and takes new files, and it is not a
// directory itself. Two names are the same file when their absolute paths
// are equal once symbolic links are resolved (in the directory, for a file
// that does not exist yet), or when both files exist with the same device
// and inode, as hard links do. reads are file names, not globs: see
// ingest.Files. No file of writes but a store's own entries may be in a
// model store's directory (a *StoreWriteError; see registry.IsStore).
func CheckFiles(reads, writes []File) error {
	return checkFilesFor(reads, writes, "")
}

// checkFilesFor is CheckFiles for a job that publishes into the model
// store store ("" for none): its entries may be written there.
func checkFilesFor(reads, writes []File, store string) error {
	type known struct {
		File
		resolved string
		info     fs.FileInfo // nil when the file does not exist
	}
	resolve := func(f File) known {
		k := known{File: f, resolved: resolvePath(f.Path)}
		if info, err := os.Stat(f.Path); err == nil {
			k.info = info
		}
		return k
	}
	var seen []known
	for _, f := range reads {
		seen = append(seen, resolve(f))
	}
	for _, w := range writes {
		kw := resolve(w)
		for _, other := range seen {
			if kw.resolved == other.resolved || kw.info != nil && other.info != nil && os.SameFile(kw.info, other.info) {
				return &SameFileError{Write: w, Other: other.File}
			}
		}
		if dir := filepath.Dir(kw.resolved); (store == "" || dir != resolvePath(store)) && registry.IsStore(dir) {
			return &StoreWriteError{Write: w, Store: filepath.Dir(w.Path)}
		}
		if err := checkCreatable(w, kw.info); err != nil {
			return err
		}
		seen = append(seen, kw)
	}
	return nil
}

// InDir reports whether the file path names is in directory dir, once
// both are resolved as CheckFiles resolves them: however they are spelt,
// through whatever symbolic links.
func InDir(path, dir string) bool {
	return filepath.Dir(resolvePath(path)) == resolvePath(dir)
}

// SamePath reports whether a and b name the same file or directory, once
// both are resolved as CheckFiles resolves them.
func SamePath(a, b string) bool {
	return resolvePath(a) == resolvePath(b)
}

// resolvePath is the absolute path of name with its symbolic links
// resolved, or its directory's for a file that does not exist yet.
func resolvePath(name string) string {
	abs, err := filepath.Abs(name)
	if err != nil {
		return filepath.Clean(name)
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		return resolved
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}

// checkCreatable makes sure that f can be written: it is not a directory
// (info, nil when f does not exist) and its directory takes a new file,
// which is tried, since permissions alone do not tell (a read-only file
// system, access lists).
func checkCreatable(f File, info fs.FileInfo) error {
	if info != nil && info.IsDir() {
		return fmt.Errorf("%s is a directory", f)
	}
	dir := filepath.Dir(f.Path)
	dirInfo, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: directory %s does not exist", f, dir)
	case err != nil:
		return fmt.Errorf("%s: %w", f, err)
	case !dirInfo.IsDir():
		return fmt.Errorf("%s: %s is not a directory", f, dir)
	}
	probe, err := os.CreateTemp(dir, ".mvml-probe-*")
	if err != nil {
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err
		}
		return fmt.Errorf("%s: cannot create files in %s: %w", f, dir, err)
	}
	return errors.Join(probe.Close(), os.Remove(probe.Name()))
}

// inputFiles are the files of patterns, as ingest will read them.
func inputFiles(patterns []string) ([]File, error) {
	names, err := ingest.Files(patterns)
	if err != nil {
		return nil, err
	}
	files := make([]File, len(names))
	for i, name := range names {
		files[i] = File{Role: "input", Path: name}
	}
	return files, nil
}

// checkFiles is CheckFiles for a scoring job: its output and rejects file
// against its inputs and model file.
func (c ScoreConfig) checkFiles() error {
	reads, err := inputFiles(c.Inputs)
	if err != nil {
		return err
	}
	if c.ModelFile != "" {
		reads = append(reads, File{Role: "model file", Path: c.ModelFile})
	}
	var writes []File
	if c.Output != sink.Stdout {
		writes = append(writes, File{Role: "output", Path: c.Output})
	}
	if c.OnError == OnErrorSkip {
		writes = append(writes, File{Role: "rejects file", Path: c.Rejects})
	}
	return CheckFiles(reads, writes)
}

// checkFiles is CheckFiles for a training job: its model file and model
// store against its inputs and view spec. The model store is opened
// (created) first, so that its entries can be checked like any file; it
// is returned, nil without ModelDir.
func (job TrainJob) checkFiles() (*registry.Dir, error) {
	var reads, writes []File
	if job.Source == nil {
		var err error
		if reads, err = inputFiles(job.Inputs); err != nil {
			return nil, err
		}
	}
	if job.SpecFile != "" {
		reads = append(reads, File{Role: "view spec", Path: job.SpecFile})
	}
	if job.LikeFile != "" {
		reads = append(reads, File{Role: "base model", Path: job.LikeFile})
	}
	if job.Output != "" {
		writes = append(writes, File{Role: "model file", Path: job.Output})
	}
	var dir *registry.Dir
	if job.ModelDir != "" {
		var err error
		if dir, err = registry.OpenDir(job.ModelDir, registry.DirOptions{}); err != nil {
			return nil, err
		}
		// The version's entry is named after the model, not known yet;
		// both entries end in .mvml, which no input does.
		writes = append(writes, File{Role: "model store entry", Path: filepath.Join(job.ModelDir, registry.CurrentModel)})
	}
	return dir, checkFilesFor(reads, writes, job.ModelDir)
}
