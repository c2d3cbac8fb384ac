package pipeline

import (
	"context"
	"os"
	"time"
)

// WatchModel checks the model file at path every interval until ctx ends
// and puts the model found there in service (Swap) when the file changed
// and holds another version than the one in service: a scheduled
// retraining job publishes, the service follows. A changed file that
// cannot be read or does not fit is logged and counted, and the service
// keeps its model; so does a file that disappears, logged once. The first
// check reads the file whatever its age, so a file replaced between the
// model's load and the watcher's start is not missed.
func (s *Service) WatchModel(ctx context.Context, path string, interval time.Duration) {
	var last os.FileInfo
	missing := false
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		info, err := os.Stat(path)
		if err != nil {
			if !missing {
				s.cfg.Logger.Warn("model file is gone; the model in service stays", "path", path, "version", s.Model().Version, "err", err)
			}
			missing = true
			continue
		}
		if missing {
			s.cfg.Logger.Info("model file is back", "path", path)
			missing = false
		}
		if last != nil && info.ModTime().Equal(last.ModTime()) && info.Size() == last.Size() {
			continue
		}
		last = info
		m, err := LoadModel(path)
		if err == nil && m.Version == s.Model().Version {
			continue
		}
		if err == nil {
			err = s.Swap(ctx, m)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.metrics.add(metricReloadFailures, 1)
			s.cfg.Logger.Error("model file changed but cannot be served", "path", path, "err", err)
			continue
		}
		s.metrics.add(metricReloads, 1)
	}
}
