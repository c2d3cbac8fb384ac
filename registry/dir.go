package registry

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mvml/mvml/model"
)

// CurrentModel is the file of a Dir that holds the current model.
const CurrentModel = "current.mvml"

// CurrentPointer is the file of a Dir that holds the current Pointer,
// written after CurrentModel.
const CurrentPointer = "current.json"

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
	// Existing opens a store that must exist, without creating it or
	// trying that it takes new files: for `mvml models`, which may read
	// a store it cannot write (a writing command then fails naming the
	// file).
	Existing bool
}

// Dir is the model store of a directory: DIR/VERSION.mvml for every
// version published, with its Manifest in DIR/VERSION.json, and
// DIR/current.mvml, a copy of the current one, with its Pointer in
// DIR/current.json; each file is written atomically, the model before
// what describes it, so that a service watching current.mvml (`mvml
// serve --model DIR/current.mvml --reload-interval D`) and a restart both
// find the newest complete model, and earlier versions stay for a
// rollback. The checkpoints are DIR/checkpoints/LINEAGE. A store written
// before the manifests and pointer existed, or a current.mvml replaced by
// other means, is read off the model files: their publisher is then not
// known, and the current model's pointer is inferred.
type Dir struct {
	dir   string
	watch *FileWatch
}

// OpenDir makes the model store dir ready before a long job ends up with a
// model it cannot save: it creates the directory when it is missing and
// checks that it takes new files (but with opts.Existing).
func OpenDir(dir string, opts DirOptions) (*Dir, error) {
	if opts.Interval < 0 {
		return nil, fmt.Errorf("model store %s: negative interval %v", dir, opts.Interval)
	}
	d := &Dir{dir: dir, watch: WatchFile(filepath.Join(dir, CurrentModel), cmp.Or(opts.Interval, DefaultDirInterval), opts.Logger)}
	if opts.Existing {
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			return nil, fmt.Errorf("model store %s does not exist or is not a directory", dir)
		}
		return d, nil
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
	return d, nil
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

// IsStore reports whether dir is a model store: it holds the current
// pointer (current.json), or, as a store written before the pointers
// existed, a current model (current.mvml) beside a version's file
// (VERSION.mvml). Such a directory is written by its store only (Publish,
// Promote, Rollback): a file written into it by other means may replace
// an entry or leave current.mvml and current.json disagreeing. A
// directory holding current.mvml alone is a model file a retraining job
// writes for serve --reload-interval, not a store.
func IsStore(dir string) bool {
	if info, err := os.Stat(filepath.Join(dir, CurrentPointer)); err == nil && info.Mode().IsRegular() {
		return true
	}
	if info, err := os.Stat(filepath.Join(dir, CurrentModel)); err != nil || !info.Mode().IsRegular() {
		return false
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if version, ok := strings.CutSuffix(e.Name(), ".mvml"); ok && !e.IsDir() && validVersion(version) {
			return true
		}
	}
	return false
}

// Path is the store's directory.
func (d *Dir) Path() string { return d.dir }

// Publish writes DIR/VERSION.mvml and DIR/VERSION.json, then, with
// makeCurrent, DIR/current.mvml and DIR/current.json. A version file is
// never replaced: one that already holds m is kept as first published
// (with its manifest), and one that holds anything else is an error,
// before current.mvml is touched.
func (d *Dir) Publish(ctx context.Context, m *model.Model, meta Meta, makeCurrent bool) (Manifest, error) {
	fail := func(err error) (Manifest, error) {
		return Manifest{}, fmt.Errorf("publish model %s: %w", m.Version, err)
	}
	pub, err := meta.publisher()
	if err != nil {
		return fail(err)
	}
	path := d.modelPath(m.Version)
	var file []byte
	var man Manifest
	switch old, oldFile, err := readFileModel(path); {
	case errors.Is(err, fs.ErrNotExist):
		if file, err = encodeModel(m); err == nil {
			err = writeAtomic(path, file, "save model")
		}
		if err != nil {
			return fail(err)
		}
		man = newManifest(m, sumOf(file), 1, meta, pub)
		if err := writeJSONAtomic(d.manifestPath(m.Version), man, "save manifest"); err != nil {
			return fail(err)
		}
	case err != nil:
		return fail(fmt.Errorf("%s exists and is not that model, refusing to replace it: %w", path, err))
	case old.Version != m.Version:
		return fail(fmt.Errorf("%s holds model %s, refusing to replace it", path, old.Version))
	default:
		file, man = oldFile, d.manifest(old, sumOf(oldFile))
	}
	if makeCurrent {
		cur, err := d.pointer(ctx)
		if err != nil {
			return fail(err)
		}
		if err := d.setPointer(ctx, cur.next(m.Version, man.SHA256, pub, ReasonPublish), file); err != nil {
			return fail(err)
		}
	}
	return man, nil
}

// Current reads DIR/current.mvml.
func (d *Dir) Current(context.Context) (*model.Model, Manifest, error) {
	m, file, err := readFileModel(filepath.Join(d.dir, CurrentModel))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, Manifest{}, fmt.Errorf("model store %s: %w", d.dir, ErrNoModel)
	case err != nil:
		return nil, Manifest{}, fmt.Errorf("model store %s: %w: %w", d.dir, ErrUnusable, err)
	}
	return m, d.manifest(m, sumOf(file)), nil
}

// List returns the manifests of every DIR/VERSION.mvml, by creation time
// (then by the time of the file), and the current pointer. A version without its manifest file is
// described by its model file; one whose file cannot be read is listed
// with its version, size and the reason in its Note.
func (d *Dir) List(ctx context.Context) (Listing, error) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return Listing{}, fmt.Errorf("model store %s: %w", d.dir, err)
	}
	var l Listing
	// published is when each version file was written: the order of
	// publications within a second of Created.
	published := map[string]time.Time{}
	for _, e := range entries {
		version, ok := strings.CutSuffix(e.Name(), ".mvml")
		if !ok || e.IsDir() || !validVersion(version) {
			continue
		}
		man, err := readManifest(d.manifestPath(version))
		if err != nil || man.Version != version {
			m, file, err := readFileModel(d.modelPath(version))
			if err != nil {
				man = Manifest{Version: version, Note: "unreadable: " + err.Error()}
			} else {
				man = d.manifest(m, sumOf(file))
			}
		}
		if info, err := e.Info(); err == nil {
			published[version] = info.ModTime()
		}
		l.Versions = append(l.Versions, man)
	}
	slices.SortFunc(l.Versions, func(a, b Manifest) int {
		return cmp.Or(a.Created.Compare(b.Created), published[a.Version].Compare(published[b.Version]), cmp.Compare(a.Version, b.Version))
	})
	if l.Current, err = d.pointer(ctx); err != nil {
		return Listing{}, err
	}
	return l, nil
}

// Get returns the file DIR/VERSION.mvml, checked (see Registry) against
// DIR/VERSION.json, or, without it, decoded.
func (d *Dir) Get(_ context.Context, version string) ([]byte, Manifest, error) {
	fail := func(err error) ([]byte, Manifest, error) {
		return nil, Manifest{}, fmt.Errorf("model store %s: %w", d.dir, err)
	}
	if !validVersion(version) {
		return fail(fmt.Errorf("version %q (want hex digits): %w", version, ErrUnknownVersion))
	}
	file, err := os.ReadFile(d.modelPath(version))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail(fmt.Errorf("model %s: %w", version, ErrUnknownVersion))
	case err != nil:
		return fail(err)
	}
	man, err := readManifest(d.manifestPath(version))
	if err != nil || man.Version != version {
		// A store of before the manifests: the file says what it is.
		var m *model.Model
		if m, err = model.Decode(bytes.NewReader(file)); err != nil {
			return fail(fmt.Errorf("%w: model %s: %w", ErrUnusable, version, err))
		}
		man = d.manifest(m, sumOf(file))
	}
	if _, err := checkFile(file, man); err != nil {
		return fail(err)
	}
	return file, man, nil
}

// Promote makes version current (see Registry): DIR/current.mvml becomes
// a copy of DIR/VERSION.mvml.
func (d *Dir) Promote(ctx context.Context, version string, meta Meta) (Pointer, bool, error) {
	return promote(ctx, d, version, meta)
}

// Rollback makes current again the version current before (see Registry).
func (d *Dir) Rollback(ctx context.Context, meta Meta) (Pointer, error) {
	return rollback(ctx, d, meta)
}

// pointer returns the current pointer: DIR/current.json when it describes
// DIR/current.mvml. Otherwise current.mvml was written without its
// pointer (by a crash between the two, an earlier release, or `mvml
// train --model DIR/current.mvml`), and the pointer is inferred from it:
// its version and checksum, the file's time, and, when current.json
// names another version, that version first in the history. A damaged
// current.mvml has the pointer of current.json, or none.
func (d *Dir) pointer(context.Context) (*Pointer, error) {
	path := filepath.Join(d.dir, CurrentModel)
	file, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("model store %s: %w", d.dir, err)
	}
	sum := sumOf(file)
	var p Pointer
	perr := readJSONFile(filepath.Join(d.dir, CurrentPointer), &p)
	if perr == nil && p.SHA256 == sum.sha && p.Version != "" {
		return &p, nil
	}
	m, err := model.Decode(bytes.NewReader(file))
	switch {
	case err != nil && perr == nil && p.Version != "":
		// A damaged current.mvml (its followers refuse it) does not stop
		// the pointer from moving, which writes it again.
		return &p, nil
	case err != nil:
		return nil, nil
	}
	inferred := Pointer{Version: m.Version, SHA256: sum.sha}
	if info, err := os.Stat(path); err == nil {
		inferred.At = info.ModTime().UTC()
	}
	if perr == nil && p.Version != "" {
		inferred.History = p.next(m.Version, sum.sha, Publisher{}, "").History
	}
	return &inferred, nil
}

// setPointer writes file as DIR/current.mvml, then p as DIR/current.json.
func (d *Dir) setPointer(_ context.Context, p Pointer, file []byte) error {
	if err := writeAtomic(filepath.Join(d.dir, CurrentModel), file, "make current"); err != nil {
		return err
	}
	return writeJSONAtomic(filepath.Join(d.dir, CurrentPointer), p, "make current")
}

func (d *Dir) modelPath(version string) string    { return filepath.Join(d.dir, version+".mvml") }
func (d *Dir) manifestPath(version string) string { return filepath.Join(d.dir, version+".json") }

// manifest describes m, whose file has sum: its manifest file when it is
// that file's, otherwise what the file says, dated by the model or, for
// a refit that says nothing of its time, by the file.
func (d *Dir) manifest(m *model.Model, sum fileSum) Manifest {
	if man, err := readManifest(d.manifestPath(m.Version)); err == nil && man.Version == m.Version && man.SHA256 == sum.sha {
		return man
	}
	man := fileManifest(m, sum)
	if _, err := time.Parse(time.RFC3339, m.Meta.Created); err != nil {
		if info, err := os.Stat(d.modelPath(m.Version)); err == nil {
			man.Created = info.ModTime().UTC().Truncate(time.Second)
		}
	}
	return man
}

// readManifest reads a manifest file.
func readManifest(path string) (Manifest, error) {
	var man Manifest
	if err := readJSONFile(path, &man); err != nil {
		return Manifest{}, err
	}
	if err := checkBlob(man.Version, man.SHA256, man.Bytes, man.Chunks); err != nil {
		return Manifest{}, fmt.Errorf("%s: %w", path, err)
	}
	return man, nil
}

func readJSONFile(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := decodeJSON(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeJSONAtomic writes v as JSON to path as writeAtomic does.
func writeJSONAtomic(path string, v any, what string) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return writeAtomic(path, append(data, '\n'), what)
}

// Follow follows DIR/current.mvml (see FileWatch.Follow), checked every
// DirOptions.Interval.
func (d *Dir) Follow(ctx context.Context, onCurrent func(*model.Model, Manifest)) error {
	return d.watch.Follow(ctx, onCurrent)
}

// Refused counts the current models Follow could not read whole.
func (d *Dir) Refused() int64 { return d.watch.Refused() }

// Looks counts the times Follow has looked at current.mvml.
func (d *Dir) Looks() int64 { return d.watch.Looks() }

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
