package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/mvml/mvml/model"
)

// CurrentModel is the file of a Dir that holds the current model.
const CurrentModel = "current.mvml"

// checkpointDir is the directory of a Dir that holds the checkpoints.
const checkpointDir = "checkpoints"

// DefaultDirInterval is how often a Dir's Follow checks current.mvml when
// DirOptions.Interval is 0.
const DefaultDirInterval = time.Minute

// DirOptions say how a Dir is followed.
type DirOptions struct {
	// Interval is how often Follow checks current.mvml. Default (0)
	// DefaultDirInterval.
	Interval time.Duration
	// Logger hears of the models Follow refuses. Default (nil) none.
	Logger *slog.Logger
}

// Dir is the model store of a directory: DIR/VERSION.mvml for every
// version published and DIR/current.mvml for the current one, each
// written atomically, so that a service watching current.mvml (`mvml
// serve --model DIR/current.mvml --reload-interval D`) and a restart both
// find the newest complete model, and earlier versions stay for a
// rollback; the checkpoints are DIR/checkpoints/LINEAGE. It keeps the
// model files only: a manifest is read off the file (its Publisher,
// Parent and Note are those given to Publish, and empty from Current).
type Dir struct {
	dir   string
	watch *FileWatch
}

// OpenDir makes the model store dir ready before a long job ends up with a
// model it cannot save: it creates the directory when it is missing and
// checks that it takes new files.
func OpenDir(dir string, opts DirOptions) (*Dir, error) {
	if opts.Interval < 0 {
		return nil, fmt.Errorf("model store %s: negative interval %v", dir, opts.Interval)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		// Say which part of the path failed, without repeating dir.
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err
			if pathErr.Path != dir {
				err = fmt.Errorf("%s: %w", pathErr.Path, pathErr.Err)
			}
		}
		return nil, fmt.Errorf("model store %s: %w", dir, err)
	}
	if err := checkCreatable(dir); err != nil {
		return nil, fmt.Errorf("model store %s: %w", dir, err)
	}
	return &Dir{dir: dir, watch: WatchFile(filepath.Join(dir, CurrentModel), cmp.Or(opts.Interval, DefaultDirInterval), opts.Logger)}, nil
}

// checkCreatable checks that dir takes a new file, by creating one: the
// permissions do not tell (ACLs, read-only mounts).
func checkCreatable(dir string) error {
	if info, err := os.Stat(filepath.Join(dir, CurrentModel)); err == nil && info.IsDir() {
		return fmt.Errorf("%s is a directory", CurrentModel)
	}
	probe, err := os.CreateTemp(dir, ".mvml-probe-*")
	if err != nil {
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err
		}
		return fmt.Errorf("cannot create files: %w", err)
	}
	return errors.Join(probe.Close(), os.Remove(probe.Name()))
}

// Path is the store's directory.
func (d *Dir) Path() string { return d.dir }

// Publish writes DIR/VERSION.mvml, then, with makeCurrent, replaces
// DIR/current.mvml. A version file is never replaced: one that already
// holds m is kept as first published, and one that holds anything else is
// an error, before current.mvml is touched.
func (d *Dir) Publish(_ context.Context, m *model.Model, meta Meta, makeCurrent bool) (Manifest, error) {
	pub, err := meta.publisher()
	if err != nil {
		return Manifest{}, fmt.Errorf("publish model %s: %w", m.Version, err)
	}
	path := filepath.Join(d.dir, m.Version+".mvml")
	var sum fileSum
	switch old, oldSum, err := readModelFile(path); {
	case errors.Is(err, fs.ErrNotExist):
		data, err := encodeModel(m)
		if err == nil {
			err = writeAtomic(path, data, "save model")
		}
		if err != nil {
			return Manifest{}, fmt.Errorf("publish model %s: %w", m.Version, err)
		}
		sum = sumOf(data)
	case err != nil:
		return Manifest{}, fmt.Errorf("publish model %s: %s exists and is not that model, refusing to replace it: %w", m.Version, path, err)
	case old.Version != m.Version:
		return Manifest{}, fmt.Errorf("publish model %s: %s holds model %s, refusing to replace it", m.Version, path, old.Version)
	default:
		sum = oldSum
	}
	if makeCurrent {
		if err := SaveModel(filepath.Join(d.dir, CurrentModel), m); err != nil {
			return Manifest{}, err
		}
	}
	return newManifest(m, sum, 1, meta, pub), nil
}

// Current reads DIR/current.mvml.
func (d *Dir) Current(context.Context) (*model.Model, Manifest, error) {
	m, sum, err := readModelFile(filepath.Join(d.dir, CurrentModel))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, Manifest{}, fmt.Errorf("model store %s: %w", d.dir, ErrNoModel)
	case err != nil:
		return nil, Manifest{}, fmt.Errorf("model store %s: %w: %w", d.dir, ErrUnusable, err)
	}
	return m, fileManifest(m, sum), nil
}

// Follow follows DIR/current.mvml (see FileWatch.Follow), checked every
// DirOptions.Interval.
func (d *Dir) Follow(ctx context.Context, onCurrent func(*model.Model, Manifest)) error {
	return d.watch.Follow(ctx, onCurrent)
}

// Refused counts the current models Follow could not read whole.
func (d *Dir) Refused() int64 { return d.watch.Refused() }

// checkpointPath is the file of lineage's checkpoint.
func (d *Dir) checkpointPath(lineage string) (string, error) {
	if !validLineage(lineage) {
		return "", fmt.Errorf("checkpoint: lineage %q: want hex digits", lineage)
	}
	return filepath.Join(d.dir, checkpointDir, lineage), nil
}

// PutCheckpoint writes DIR/checkpoints/LINEAGE atomically.
func (d *Dir) PutCheckpoint(_ context.Context, lineage string, data []byte) error {
	path, err := d.checkpointPath(lineage)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return writeAtomic(path, data, "checkpoint")
}

// Checkpoint reads DIR/checkpoints/LINEAGE.
func (d *Dir) Checkpoint(_ context.Context, lineage string) ([]byte, error) {
	path, err := d.checkpointPath(lineage)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model store %s: lineage %s: %w", d.dir, lineage, ErrNoCheckpoint)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return data, nil
}

// Close does nothing: a directory holds no connection.
func (d *Dir) Close(context.Context) error { return nil }

// validLineage reports whether s can be a lineage (model.Lineage: hex
// digits), which makes it a safe file name and Kafka key.
func validLineage(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}
