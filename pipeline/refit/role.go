package refit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/metrics"
	"github.com/mvml/mvml/registry"
)

// Defaults of a Config.
const (
	// DefaultSessionTimeout is how long the coordinator waits for
	// an active refitter's heartbeat before a standby takes over.
	DefaultSessionTimeout = 30 * time.Second
	// DefaultGateMargin is the relative margin m of the gate of a tuned
	// refit (Config.GateMargin; the rule is gate.Passes). Ten percent,
	// because the cross-validated loss `mvml train` records is optimistic
	// by about 5% (its landmarks are among the rows it validates on), so a
	// tighter default rejects clean refits of a trained model.
	DefaultGateMargin = 0.1
	// refitterRequestTimeout bounds a request to the brokers.
	refitterRequestTimeout = 30 * time.Second
)

// Config describes `mvml refit`: the one refitter of a deployment
// of serve replicas. It merges the statistics deltas the replicas publish
// on the stats topic into the statistics of the model current in the
// model store, refits and publishes the model (made current), then its
// checkpoint. Two or more refitters of one Group share the work as active
// and standby: the group's member assigned the stats topic's partition is
// active.
type Config struct {
	// Conn says how to reach the brokers, and how a write, a read or an
	// offset commit retries a transient failure. Required: its Brokers.
	Conn kafkaconn.Config
	// StatsTopic is the stats topic: one partition, a retention longer
	// than the time between two refits. Required.
	StatsTopic string
	// Group is the consumer group of the refitters on StatsTopic: its
	// member assigned the partition is active. Required.
	Group string
	// Models is the model store the current model is read from and every
	// refit published to, with the checkpoints (registry.Kafka, the model
	// topic). Required. The refitter neither opens nor closes it.
	Models registry.Store
	// ModelDir, when set, also receives every refitted model as
	// VERSION.mvml and current.mvml (registry.Dir); it is created, or
	// refused, by New.
	ModelDir string
	// Rows starts a refit once this many labelled rows were merged since
	// the last one. 0 means never by count.
	Rows int
	// Interval starts a refit when this much time passed since the last
	// one (or since the refitter became active) and rows were merged
	// since. 0 means never by time. Rows and Interval may not both be 0
	// but with Once.
	Interval time.Duration
	// Decay in (0, 1] is the exponential forgetting of the statistics: at
	// every refit, the statistics of the previous refit are multiplied by
	// Decay before the rows merged since are added, so a row merged k
	// refits ago weighs Decay^k. It applies at refits only, never to a
	// replica's delta, so that a replay after a failover decays alike.
	// 0 means 1: every row counts fully.
	Decay float64
	// Cold fits every refit from the paper's initialisation, as training
	// does (model.Accumulator.RefitCold), so that it equals `mvml train
	// --like` on the same rows; otherwise a refit starts from the current
	// model's metric and weights.
	Cold bool
	// Folds, when more than 1, keeps the lineage's statistics as that many
	// fold sums (model.NewFoldAccumulator), for Tune and the gate: every
	// delta must keep as many (serve.LateLabels.Folds, pipeline.StatsJob.Folds); one of
	// another number is refused and logged, and a checkpoint of another
	// number stops the refitter with an error (unless FoldsFromCheckpoint).
	// Default (0) one, which takes deltas of any number of folds, their
	// folds merged into one sum.
	Folds int
	// FoldsFromCheckpoint makes a lineage whose checkpoint keeps another
	// number of folds than Folds go on with the checkpoint's number
	// (logged) instead of stopping the refitter: `mvml refit` without
	// --folds, so that a lineage begun with another default continues. A
	// checkpoint of one sum still stops a refitter that tunes.
	FoldsFromCheckpoint bool
	// Tune, when not empty, lists candidate values of the fit's
	// hyper-parameters (model.TuneKeys, the grammar of `cv --grid`):
	// every refit cross-validates them exactly on the Folds fold sums
	// (model.Accumulator.Tune, warm-started from the current model unless
	// Cold) and fits the one of least loss; the table goes into the
	// model's manifest and the values chosen into /metrics. Needs Folds
	// of 2 or more.
	Tune map[string][]float64
	// GateMargin is the relative margin of the gate a tuned refit passes
	// before it is made current (see leader.gate), DefaultGateMargin for
	// `mvml refit`'s default: 0 allows no loss at all, a negative margin
	// means no gate. Without Tune there is no gate. A refit the gate
	// rejects is published as a candidate, not made current.
	GateMargin float64
	// Once merges the deltas up to the end the stats topic has when the
	// refitter becomes active, refits, publishes the model and the
	// checkpoint, and returns: a batch job. It fails when there is no
	// current model, nothing to merge, or another member of Group is
	// active.
	Once bool
	// SessionTimeout is how long the coordinator waits for an active
	// refitter's heartbeats before a standby takes over. Default (0)
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// HTTPAddr is where /healthz, /readyz and /metrics are served while
	// the refitter runs. Default ("") none.
	HTTPAddr string
	// Host names the refitter as the publisher of its models. Default
	// ("") the host name.
	Host string
	// Logger receives a line per refit and per delta refused. Default
	// (nil) none.
	Logger *slog.Logger
}

// Role is a running (or ready to run) `mvml refit`.
type Role struct {
	cfg    Config
	logger *slog.Logger
	dir    *registry.Dir
	// client is closed when Run returns.
	client  *kafkaconn.Client
	metrics refitMetrics
	// metricsHandler serves /metrics from a registry of the refitter's own.
	metricsHandler http.Handler
	running        atomic.Bool
	// cands are the candidates of cfg.Tune.
	cands []model.Candidate

	mu     sync.Mutex // guards what follows, for ServeHTTP
	role   refitRole
	detail string
	// lineage and version are those of the statistics refitted and of
	// the model current in the store, while active.
	lineage, version string
	// tuned are the values the last tuned refit chose.
	tuned model.Candidate
}

// refitRole is what a refitter does in its group.
type refitRole string

const (
	roleJoining refitRole = "joining"
	roleStandby refitRole = "standby"
	roleActive  refitRole = "active"
)

// New checks cfg and prepares the model directory.
func New(cfg Config) (*Role, error) {
	switch err := cfg.Conn.Validate(); {
	case err != nil:
		return nil, fmt.Errorf("refit: %w", err)
	case cfg.StatsTopic == "":
		return nil, errors.New("refit: no stats topic")
	case cfg.Group == "":
		return nil, errors.New("refit: no consumer group")
	case cfg.Models == nil:
		return nil, errors.New("refit: no model store")
	case cfg.Rows < 0 || cfg.Interval < 0 || cfg.SessionTimeout < 0:
		return nil, fmt.Errorf("refit: negative rows %d, interval %v or session timeout %v", cfg.Rows, cfg.Interval, cfg.SessionTimeout)
	case cfg.Rows == 0 && cfg.Interval == 0 && !cfg.Once:
		return nil, errors.New("refit: neither a row count nor an interval starts a refit")
	case cfg.Decay < 0 || cfg.Decay > 1:
		return nil, fmt.Errorf("refit: decay %g outside (0, 1]", cfg.Decay)
	case cfg.Folds < 0 || cfg.Folds > model.MaxFolds:
		return nil, fmt.Errorf("refit: %d folds: want 1 to %d", cfg.Folds, model.MaxFolds)
	case len(cfg.Tune) > 0 && cfg.Folds < 2:
		return nil, fmt.Errorf("refit: tuning needs 2 folds or more, not %d", cfg.Folds)
	}
	var cands []model.Candidate
	if len(cfg.Tune) > 0 {
		var err error
		if cands, err = model.Candidates(cfg.Tune); err != nil {
			return nil, fmt.Errorf("refit: %w", err)
		}
	}
	if cfg.Decay == 0 {
		cfg.Decay = 1
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Role{cfg: cfg, logger: logger, role: roleJoining, cands: cands}
	r.metricsHandler = metrics.Handler(logger, newRefitterCollector(r))
	if cfg.ModelDir != "" {
		var err error
		if r.dir, err = registry.OpenDir(cfg.ModelDir, registry.DirOptions{}); err != nil {
			return nil, fmt.Errorf("refit: %w", err)
		}
	}
	r.client = cfg.Conn.NewClient(refitterRequestTimeout)
	return r, nil
}

// Run joins the group and refits while it is the active member, until ctx
// ends (it then returns nil), the stats topic cannot be used, or, with
// Once, its one refit is published or fails. Meanwhile it serves HTTP.
func (r *Role) Run(ctx context.Context) error {
	defer r.client.Close()
	if err := checkStatsTopic(ctx, r.client, r.cfg.StatsTopic, r.retry); err != nil {
		return fmt.Errorf("refit: %w", err)
	}
	return metrics.Serve(ctx, r.cfg.HTTPAddr, r, r.logger, r.run)
}

// run follows the generations of the group: in each, the member assigned
// the stats topic's partition leads, the others stand by.
func (r *Role) run(ctx context.Context) error {
	r.running.Store(true)
	defer r.running.Store(false)
	group, err := r.cfg.Conn.NewGroup(kafkaconn.GroupConfig{
		ID: r.cfg.Group, Topics: []string{r.cfg.StatsTopic},
		// A tenth of the session: several heartbeats may be lost before
		// the coordinator gives up on an active refitter.
		HeartbeatInterval: r.cfg.SessionTimeout / 10, SessionTimeout: r.cfg.SessionTimeout,
		OnError: func(text string) {
			r.logger.Warn("refit: kafka: "+text, "group", r.cfg.Group)
		},
	})
	if err != nil {
		return fmt.Errorf("refit: %w", err)
	}
	// Leaving the group hands the partition to a standby at once.
	defer group.Close()
	r.setRole(roleJoining, "joining group "+r.cfg.Group)
	for {
		// A standby stays one while Next waits for the next generation.
		gen, err := group.Next(ctx)
		switch {
		case ctx.Err() != nil || errors.Is(err, kafkaconn.ErrGroupClosed):
			return nil
		case err != nil && kafkaconn.Transient(err):
			r.setRole(roleJoining, "joining group "+r.cfg.Group+": "+err.Error())
			continue
		case err != nil:
			return fmt.Errorf("refit: joining consumer group %s: %w", r.cfg.Group, err)
		}
		if !slices.ContainsFunc(gen.Assignments[r.cfg.StatsTopic], func(p kafkaconn.Assigned) bool { return p.Partition == 0 }) {
			if r.cfg.Once {
				return fmt.Errorf("refit: another member of group %s is active on stats topic %s: --once runs while no refitter does", r.cfg.Group, r.cfg.StatsTopic)
			}
			r.setRole(roleStandby, "standby: another member of group "+r.cfg.Group+" is active")
			r.logger.Info("refit: standby", "group", r.cfg.Group, "generation", gen.ID)
			continue // Next waits for the generation to end
		}
		led := make(chan error, 1)
		gen.Start(func(genCtx context.Context) {
			leadCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(genCtx, cancel)()
			led <- r.lead(leadCtx, gen)
		})
		err = <-led
		r.metrics.set(refitMetricActive, 0)
		if err != nil || r.cfg.Once || ctx.Err() != nil {
			return err
		}
		r.logger.Info("refit: no longer active", "group", r.cfg.Group, "generation", gen.ID)
		r.setRole(roleJoining, "joining group "+r.cfg.Group+" again")
	}
}

// retry runs op as Conn.Retry says, logging each retry.
func (r *Role) retry(ctx context.Context, what string, op func() error) error {
	return r.cfg.Conn.Retry.Do(ctx, op, func(err error, pause time.Duration) {
		r.logger.Warn("refit: "+what+" failed, retrying", "in", pause, "err", err)
	})
}

func (r *Role) setRole(role refitRole, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.role, r.detail = role, detail
	if role != roleActive {
		r.lineage, r.version = "", ""
	}
}

// setServing records the lineage refitted and the current model, while
// active.
func (r *Role) setServing(lineage, version string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.role, r.detail, r.lineage, r.version = roleActive, "active", lineage, version
}

// setTuned records the values a tuned refit chose, for /metrics.
func (r *Role) setTuned(c model.Candidate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tuned = c
}
