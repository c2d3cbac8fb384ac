package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/pipeline/internal/metrics"
	"github.com/mvml/mvml/pipeline/refit"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// KafkaConfig describes the Kafka deployment of a Service, `mvml
// serve`: a consumer group on an input topic of records (JSON objects or
// Arrow IPC streams), scores to a
// topic or to a directory of Parquet files, dead letters to a topic, a
// model store followed (a model topic) or a model file watched, refits
// published, and the health and metrics over HTTP.
type KafkaConfig struct {
	// Conn says how every client reaches the brokers, and how writes and
	// offset commits retry a transient failure (Conn.Retry). Required: its
	// Brokers.
	Conn kafkaconn.Config
	// Topic is the input topic of records. Required.
	Topic string
	// Format says how its messages are read (ingest.KafkaConfig.Format):
	// by their content-type header, JSON unless it names an Arrow IPC
	// stream (the default), or all as JSON, or all as Arrow.
	Format ingest.Format
	// Group is the consumer group, whose committed offsets say where a
	// restart resumes. Required.
	Group string
	// StartOffset is where a group without committed offsets starts:
	// ingest.KafkaOldest or ingest.KafkaNewest. Default (0) KafkaOldest.
	StartOffset int64
	// MaxWait is the longest wait to fill a batch once it has a record;
	// a batch waits only while more records are known to be coming (see
	// ingest.KafkaConfig.MaxWait). Default (0) ingest.DefaultKafkaMaxWait,
	// 250ms.
	MaxWait time.Duration
	// SessionTimeout is how long the group waits for a silent replica
	// (one that crashed) before its partitions go to the others. Default
	// (0) DefaultSessionTimeout, 10s.
	SessionTimeout time.Duration
	// HeartbeatInterval is how often a replica tells the group it is
	// alive, and so how soon it learns that the group rebalances (a
	// replica stopped or started) and gives up its partitions to rejoin:
	// the whole group waits for the last replica to learn it. Default (0)
	// DefaultHeartbeatInterval, 1s, or a third of SessionTimeout if
	// that is shorter.
	HeartbeatInterval time.Duration
	// OutputTopic receives one JSON score per record, keyed by id, or
	// with ArrowOutput the scores of a batch as Arrow IPC streams, one
	// message per partition (sink.KafkaArrowSink). This or OutputDir is
	// required.
	OutputTopic string
	ArrowOutput bool
	// OutputDir receives the scores as Parquet files instead, rolled as
	// Roll says (default sink.RollingPolicy's); a record is committed once
	// its file is. It must exist.
	OutputDir string
	Roll      sink.RollingPolicy
	// DeadLetterTopic receives the records that cannot be scored, with the
	// reason in headers. Required.
	DeadLetterTopic string
	// Model is the model served until the first refit or reload. Required.
	Model *model.Model
	// Models, when set, is a model store the service follows
	// (Service.FollowModels), such as a model topic (registry.Kafka) shared
	// by every replica: the model it makes current is put in service
	// between two batches, and every refitted model is published to it and
	// made current. The runner neither opens nor closes it.
	Models registry.Store
	// ModelFile, when ReloadInterval is positive, is checked that often,
	// and the model a retraining job writes there is served
	// (registry.WatchFile). Not with Models. Default (0) no checks.
	ModelFile      string
	ReloadInterval time.Duration
	// ModelDir, when set, receives every refitted model as VERSION.mvml
	// and current.mvml (registry.Dir); it is created, or refused, by
	// NewKafkaRunner, not at the first refit. Default ("") refitted models
	// are saved nowhere but in Models.
	ModelDir string
	// Refit, Contributions, ShutdownGrace, Workers, InFlight and
	// WritesInFlight are the Service's (see Config); WritesInFlight
	// serves an output topic, not OutputDir.
	Refit          RefitPolicy
	Contributions  bool
	ShutdownGrace  time.Duration
	Workers        int
	InFlight       int
	WritesInFlight int
	// LabelsTopic, when set, is a topic of labels that arrive apart from
	// their records ({"id": …, "label": …}, keyed by id), read by the same
	// group: it must be co-partitioned with Topic (as many partitions,
	// both keyed by id with the same partitioner; a generation that finds
	// otherwise stops the service). Its labels are joined with the records
	// scored, as Labels says; a newly owned partition is restored from the
	// input topic first. Default ("") none.
	LabelsTopic string
	// StatsTopic, when set, receives the statistics of the labels joined
	// and of in-record labels, as deltas for the refitter (see
	// refit.StatsTopicConfig); their label offsets are committed only after. It
	// needs Models (the refitter's checkpoints are there) and excludes
	// refits here (Refit, ModelDir). Default ("") none: labels feed the
	// service's own refits.
	StatsTopic string
	// Labels tunes the join of late labels and the publication of the
	// statistics (Window, CacheBytes, QualityWindow, StatsInterval,
	// StatsRows, Replica, RereadLimit); the runner sets its Source, Topic,
	// Restore and Stats.
	Labels LateLabels
	// HTTPAddr is where /healthz, /readyz and /metrics are served while the
	// service runs. Default ("") none.
	HTTPAddr string
	// Options set the batch size, the allocator and the logger, which
	// receives the lines of the source, the sinks and the service (see
	// Options for their defaults).
	Options pipeline.Options
}

// The consumer group's timings of a replica (see KafkaConfig and
// ingest.KafkaConfig), chosen for rolling deploys. A replica that stops
// leaves the group at once and one that starts joins it; either way the
// group rebalances, and every replica stops scoring from the heartbeat at
// which it learns so until the last one rejoined: a heartbeat of 1s keeps
// that stop near a second (kafka-go's 3s made it up to 3s, and a
// replica's own partitions waited up to 6s). A replica that crashes is
// noticed after the session timeout: 10s (and a heartbeat) before its
// partitions are scored again, where 30s left them unscored for half a
// minute; brokers refuse less than 6s by default. A join that failed is
// tried again after a second rather than kafka-go's 5s.
const (
	DefaultSessionTimeout    = 10 * time.Second
	DefaultHeartbeatInterval = time.Second
	serveJoinGroupBackoff    = time.Second
)

// KafkaRunner is a Service wired as KafkaConfig says, with its source,
// sinks, model watcher and HTTP server: the one way the command line and
// the demo serve Kafka. NewKafkaRunner opens the source and sinks, and Run
// closes them when it returns: a runner is made to be run, once.
type KafkaRunner struct {
	cfg  KafkaConfig
	svc  *Service
	src  *ingest.KafkaSource
	out  sink.Sink
	dead sink.DeadLetters
	// dir is ModelDir's store, nil without one.
	dir *registry.Dir
	// stats is StatsTopic's publisher, nil without one.
	stats *refit.StatsTopic
	// assigned is closed once svc is set: the source's generation hooks,
	// which may run as soon as it opens, wait for it.
	assigned chan struct{}
}

// NewKafkaRunner checks cfg, prepares the model store, and opens the
// consumer group's source, the output and the dead-letter destination; it
// does not wait for the brokers.
func NewKafkaRunner(cfg KafkaConfig) (*KafkaRunner, error) {
	switch {
	case cfg.Model == nil:
		return nil, errors.New("serve: no model")
	case (cfg.OutputTopic == "") == (cfg.OutputDir == ""):
		return nil, errors.New("serve: give one of an output topic and an output directory")
	case cfg.ArrowOutput && cfg.OutputTopic == "":
		return nil, errors.New("serve: Arrow output is for an output topic, not a directory of Parquet files")
	case cfg.DeadLetterTopic == "":
		return nil, errors.New("serve: no dead-letter topic")
	case cfg.ReloadInterval < 0:
		return nil, fmt.Errorf("serve: negative reload interval %v", cfg.ReloadInterval)
	case cfg.SessionTimeout < 0 || cfg.HeartbeatInterval < 0:
		return nil, fmt.Errorf("serve: negative session timeout %v or heartbeat interval %v", cfg.SessionTimeout, cfg.HeartbeatInterval)
	case cfg.ReloadInterval > 0 && cfg.ModelFile == "":
		return nil, fmt.Errorf("serve: reloading every %v needs a model file", cfg.ReloadInterval)
	case cfg.ReloadInterval > 0 && cfg.Models != nil:
		return nil, errors.New("serve: follow a model store or a model file, not both")
	case cfg.StatsTopic != "" && cfg.Models == nil:
		return nil, errors.New("serve: publishing statistics needs the model store the refitter publishes to and checkpoints in")
	case cfg.StatsTopic != "" && (cfg.Refit.enabled() || cfg.ModelDir != ""):
		return nil, errors.New("serve: with a stats topic the refitter refits: no refits here, and no model directory for them")
	}
	var dir *registry.Dir
	if cfg.ModelDir != "" {
		var err error
		if dir, err = registry.OpenDir(cfg.ModelDir, registry.DirOptions{}); err != nil {
			return nil, err
		}
	}
	opts := cfg.Options.WithDefaults()
	m := cfg.Model
	r := &KafkaRunner{cfg: cfg, dir: dir, assigned: make(chan struct{})}
	late := cfg.LabelsTopic != "" || cfg.StatsTopic != ""
	if cfg.StatsTopic != "" {
		// The stats topic is checked before the group is joined.
		ctx, cancel := context.WithTimeout(context.Background(), metrics.ShutdownTimeout+refit.StatsRequestTimeout)
		var err error
		r.stats, err = refit.OpenStatsTopic(ctx, refit.StatsTopicConfig{Conn: cfg.Conn, Topic: cfg.StatsTopic, Models: cfg.Models, Logger: opts.Logger})
		cancel()
		if err != nil {
			return nil, err
		}
	}
	kcfg := ingest.KafkaConfig{
		Conn: cfg.Conn, Topic: cfg.Topic, Format: cfg.Format, LabelsTopic: cfg.LabelsTopic, GroupID: cfg.Group, MaxWait: cfg.MaxWait,
		StartOffset: cfg.StartOffset, JoinGroupBackoff: serveJoinGroupBackoff,
	}
	kcfg.SessionTimeout, kcfg.HeartbeatInterval = cfg.groupTimings()
	if late {
		kcfg.OnAssign, kcfg.OnRevoke = r.onAssign, r.onRevoke
	}
	src, err := ingest.NewKafka(m.Spec, kcfg, opts.IngestOptions(false))
	if err != nil {
		return nil, errors.Join(err, r.close(context.Background(), err))
	}
	r.src = src
	if cfg.OutputDir != "" {
		schema := schemas.OutputSchema(m.Outputs(), len(m.Spec.Views), cfg.Contributions)
		r.out, err = sink.NewRollingParquet(cfg.OutputDir, "scores", schema, sink.ParquetOptions{}, cfg.Roll)
	} else if cfg.ArrowOutput {
		r.out, err = sink.NewKafkaArrow(sink.KafkaWriterConfig{Conn: cfg.Conn, Topic: cfg.OutputTopic, Logger: opts.Logger}, opts.Allocator)
	} else {
		// The writes of small batches at light load leave together (see
		// sink.KafkaWriterConfig.Coalesce).
		r.out, err = sink.NewKafka(sink.KafkaWriterConfig{Conn: cfg.Conn, Topic: cfg.OutputTopic, Logger: opts.Logger, Coalesce: true})
	}
	if err == nil {
		r.dead, err = sink.NewKafkaDeadLetters(sink.KafkaWriterConfig{Conn: cfg.Conn, Topic: cfg.DeadLetterTopic, Logger: opts.Logger})
	}
	if err == nil {
		sc := Config{
			Model: m, Source: src, Output: r.out, DeadLetters: r.dead, Contributions: cfg.Contributions,
			Refit: cfg.Refit, OnRefit: r.publish, ShutdownGrace: cfg.ShutdownGrace, Workers: cfg.Workers, InFlight: cfg.InFlight,
			WritesInFlight: cfg.WritesInFlight,
			Allocator:      opts.Allocator, Logger: opts.Logger,
		}
		if late {
			labels := cfg.Labels
			labels.Restore = r.restore
			if cfg.LabelsTopic != "" {
				labels.Source, labels.Topic = src, cfg.LabelsTopic
			}
			if r.stats != nil {
				labels.Stats = r.stats
			}
			sc.Labels = &labels
		}
		if cfg.Refit.tuning() {
			sc.OnGated = r.publishGated
		}
		r.svc, err = NewService(sc)
	}
	// The source's generation hooks may go on now, with or without a
	// service.
	close(r.assigned)
	if err != nil {
		// Nothing was written: nothing to wait for.
		return nil, errors.Join(err, r.close(context.Background(), err))
	}
	return r, nil
}

// groupTimings are the session timeout and heartbeat interval of the
// replica's consumer group, their defaults filled in.
func (cfg KafkaConfig) groupTimings() (session, heartbeat time.Duration) {
	session = cmp.Or(cfg.SessionTimeout, DefaultSessionTimeout)
	heartbeat = cmp.Or(cfg.HeartbeatInterval, min(DefaultHeartbeatInterval, session/3))
	return session, heartbeat
}

// onAssign starts a generation of the group for the join of late labels
// (ingest.KafkaConfig.OnAssign).
func (r *KafkaRunner) onAssign(ctx context.Context, a ingest.Assignment) error {
	select {
	case <-r.assigned:
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.svc == nil {
		return errors.New("serve: the service could not be made")
	}
	return r.svc.join.assign(ctx, a)
}

// onRevoke ends a generation of the group for the join of late labels
// (ingest.KafkaConfig.OnRevoke).
func (r *KafkaRunner) onRevoke(ctx context.Context, a ingest.Assignment) {
	select {
	case <-r.assigned:
	case <-ctx.Done():
		return
	}
	if r.svc != nil {
		r.svc.join.revoke(ctx, a)
	}
}

// restore opens the records of partition p of the input topic from time
// from up to offset end (LateLabels.Restore).
func (r *KafkaRunner) restore(ctx context.Context, p int, from time.Time, end int64) (ingest.Source, error) {
	opts := r.cfg.Options.WithDefaults()
	return ingest.NewKafkaRange(ctx, r.cfg.Model.Spec, ingest.KafkaRangeConfig{
		Conn: r.cfg.Conn, Topic: r.cfg.Topic, From: from, Ends: map[int]int64{p: end}, MaxWait: r.cfg.MaxWait,
	}, opts.IngestOptions(false))
}

// Service is the service the runner runs, for its counters and Swap.
func (r *KafkaRunner) Service() *Service { return r.svc }

// publish saves a refitted model to the model stores, if there are any,
// and makes it current there: publishGated without a gate's verdict.
func (r *KafkaRunner) publish(ctx context.Context, m *model.Model) error {
	return r.publishGated(ctx, m, nil)
}

// follower is what the runner follows: the model store, the model file
// checked every ReloadInterval, or nothing (nil).
func (r *KafkaRunner) follower() registry.Follower {
	switch {
	case r.cfg.Models != nil:
		return r.cfg.Models
	case r.cfg.ReloadInterval > 0:
		return registry.WatchFile(r.cfg.ModelFile, r.cfg.ReloadInterval, r.svc.cfg.Logger)
	}
	return nil
}

// Run serves until ctx is cancelled, the service fails, the HTTP address
// cannot be listened on, or the model store cannot be followed any more
// (a refusal that waiting cannot mend), as Service.Run does; meanwhile it
// follows the model store or file and serves HTTP. Then it closes the source and the sinks,
// within the shutdown grace: a directory of Parquet files is committed
// after a clean stop, but its file in progress is dropped after a failure,
// since the records in it were not acknowledged and will be scored again.
func (r *KafkaRunner) Run(ctx context.Context) error {
	err := r.run(ctx)
	closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.svc.cfg.ShutdownGrace)
	defer cancel()
	return errors.Join(err, r.close(closing, err))
}

func (r *KafkaRunner) run(ctx context.Context) (err error) {
	if f := r.follower(); f != nil {
		var stopFollowing context.CancelFunc
		ctx, stopFollowing = context.WithCancel(ctx)
		followed := make(chan error, 1)
		go func() {
			err := r.svc.FollowModels(ctx, f)
			if err != nil {
				stopFollowing() // the service stops too
			}
			followed <- err
		}()
		defer func() {
			stopFollowing()
			if ferr := <-followed; ferr != nil {
				err = errors.Join(err, fmt.Errorf("serve: following the model store: %w", ferr))
			}
		}()
	}
	return metrics.Serve(ctx, r.cfg.HTTPAddr, r.svc, r.svc.cfg.Logger, r.svc.Run)
}

// close closes what the runner opened, within ctx; after a failure
// (runErr) an output that can be aborted is, rather than committed.
func (r *KafkaRunner) close(ctx context.Context, runErr error) error {
	var err error
	if r.src != nil {
		err = r.src.Close()
	}
	if r.stats != nil {
		err = errors.Join(err, r.stats.Close(ctx))
	}
	if r.out != nil {
		if aborter, ok := r.out.(sink.Aborter); ok && runErr != nil {
			err = errors.Join(err, aborter.Abort())
		} else {
			err = errors.Join(err, r.out.Close(ctx))
		}
	}
	if r.dead != nil {
		err = errors.Join(err, r.dead.Close(ctx))
	}
	return err
}
