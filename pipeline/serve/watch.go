package serve

import (
	"context"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/registry"
)

// FollowModels puts in service (Swap) every model f makes current — a
// model topic (registry.Kafka), a model store's current.mvml
// (registry.Dir) or a model file a retraining job replaces
// (registry.WatchFile) — until ctx ends (it then returns nil) or f cannot
// go on (its error). A model f refuses (partial, damaged, missing) and one
// that Swap refuses (other views, other outputs) are logged and counted
// as reload failures, and the model in service stays. The model in
// service is passed over, and so is a refit of this service's own that
// f gives back before the service took it in (OnRefit published it):
// swapping it in would start the statistics again. Following starts once
// Run has started, which can then take the models in.
func (s *Service) FollowModels(ctx context.Context, f registry.Follower) error {
	s.followersMu.Lock()
	s.followers = append(s.followers, f)
	s.followersMu.Unlock()
	select {
	case <-s.begun:
	case <-ctx.Done():
		return nil
	}
	return f.Follow(ctx, func(m *model.Model, man registry.Manifest) {
		// The own refit first: it is forgotten only once in service.
		if m.Version == s.ownRefit() || m.Version == s.Model().Version {
			return
		}
		if err := s.Swap(ctx, m); err != nil {
			if ctx.Err() != nil || !s.running() {
				return // the service stops: not the model's fault
			}
			s.metrics.add(metricReloadFailures, 1)
			s.cfg.Logger.Error("model made current cannot be served; the model in service stays", "model_version", m.Version, "lineage", man.Lineage, "err", err)
			return
		}
		s.metrics.add(metricReloads, 1)
	})
}

// refused counts the models the followers refused.
func (s *Service) refused() int64 {
	s.followersMu.Lock()
	defer s.followersMu.Unlock()
	var n int64
	for _, f := range s.followers {
		n += f.Refused()
	}
	return n
}

// ownRefit is the version of the refit handed to OnRefit and not yet put
// in service, or "".
func (s *Service) ownRefit() string {
	v, _ := s.refitting.Load().(string)
	return v
}
