package registry

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/mvml/mvml/model"
)

// FileWatch follows the model in one file, which a training job replaces
// atomically (`mvml train --model F`, or current.mvml of a Dir).
type FileWatch struct {
	path     string
	interval time.Duration
	logger   *slog.Logger
	refused  atomic.Int64
	looks    atomic.Int64
}

// WatchFile returns a follower of the model file at path, checked every
// interval (positive); logger (nil: none) hears of a file that cannot be
// served, that disappears or that comes back.
func WatchFile(path string, interval time.Duration, logger *slog.Logger) *FileWatch {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &FileWatch{path: path, interval: interval, logger: logger}
}

// Follow checks the file at once and then every interval until ctx ends,
// and calls onCurrent with the model found there whenever the file
// changed and holds another version than the one it last gave. A changed
// file that cannot be read whole is logged and counted (Refused); a file
// that disappears is logged once, and so is its return. It returns nil
// when ctx ends.
func (w *FileWatch) Follow(ctx context.Context, onCurrent func(*model.Model, Manifest)) error {
	var last os.FileInfo
	var version string
	missing := false
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		info, err := os.Stat(w.path)
		if err != nil {
			if !missing {
				w.logger.Warn("model file is gone; the model in service stays", "path", w.path, "err", err)
			}
			missing = true
		} else {
			if missing {
				w.logger.Info("model file is back", "path", w.path)
				missing = false
			}
			if last == nil || !info.ModTime().Equal(last.ModTime()) || info.Size() != last.Size() {
				last = info
				version = w.check(version, onCurrent)
			}
		}
		w.looks.Add(1)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// check reads the file and hands its model to onCurrent unless it is
// version, the one handed last; it returns the version handed last.
func (w *FileWatch) check(version string, onCurrent func(*model.Model, Manifest)) string {
	m, sum, err := readModelFile(w.path)
	switch {
	case err != nil:
		w.refused.Add(1)
		w.logger.Error("model file changed but cannot be served; the model in service stays", "path", w.path, "err", err)
	case m.Version != version:
		onCurrent(m, fileManifest(m, sum))
		return m.Version
	}
	return version
}

// Refused counts the changed files Follow could not read whole.
func (w *FileWatch) Refused() int64 { return w.refused.Load() }

// Looks counts the times Follow has looked at the file and acted on what
// it found; a test waits on it to know that a look came and went.
func (w *FileWatch) Looks() int64 { return w.looks.Load() }

// fileManifest describes a model read from a file, which keeps no record
// of its publication.
func fileManifest(m *model.Model, sum fileSum) Manifest {
	return newManifest(m, sum, 1, Meta{}, Publisher{})
}
