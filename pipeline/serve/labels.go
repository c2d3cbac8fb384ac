package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/rows"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/statsbus"
)

// Defaults of LateLabels.
const (
	DefaultLabelWindow     = 24 * time.Hour
	DefaultLabelCacheBytes = 256 << 20
	DefaultStatsInterval   = 10 * time.Second
	DefaultStatsRows       = 10_000
	// DefaultLabelRereadLimit bounds the labels of a partition read again
	// after a rebalance (LateLabels.RereadLimit).
	DefaultLabelRereadLimit = 100_000
)

// LabelSource delivers the labels that arrive apart from their records,
// and commits their offsets once they are done with: an
// ingest.KafkaSource reading a labels topic in the records' consumer
// group.
type LabelSource interface {
	NextLabels(ctx context.Context) (ingest.LabelBatch, error)
	// CommitLabelsHandled commits the next offset to read of partitions
	// of the labels topic, with the offset below which every message was
	// handled (ingest.KafkaSource.CommitLabelsHandled), which the next
	// assignment of the partition gives (ingest.Assignment.LabelsHandled).
	CommitLabelsHandled(ctx context.Context, generation int32, offsets, handled map[int]int64) error
}

// StatsPublisher is where a replica publishes the statistics of the
// labels it joined, for the refitter: a stats topic (StatsTopic).
type StatsPublisher interface {
	// Publish writes d and returns once the brokers acknowledged it
	// whole.
	Publish(ctx context.Context, d *statsbus.Delta) error
	// Published returns the label offsets that published deltas hold, as
	// far as a replica taking over partitions must know them: those of
	// the deltas the refitter of lineage has not merged into its
	// checkpoint yet, and those its checkpoint holds.
	Published(ctx context.Context, lineage string) (statsbus.Ranges, error)
}

// RestoreFunc opens the records of partition p of the input topic with a
// timestamp at or after from, up to offset end (not included): those the
// partition's previous owner scored, whose labels may still come.
type RestoreFunc func(ctx context.Context, partition int, from time.Time, end int64) (ingest.Source, error)

// LateLabels says how a Service joins the labels that arrive apart from
// their records (a labels topic, co-partitioned with the input topic and
// read by the same consumer group): the records scored wait for their
// label in a join store (their projected features, prediction and model),
// a label that comes first waits for its record, and each label joined
// scores the prediction that was served (the prequential quality, by
// model version) and adds its row to the statistics, which are published
// as deltas to a StatsPublisher (or, without one, feed the Service's own
// refits). Labels that find no record are counted by reason, never lost
// silently. A label's offset is committed only once it was used: joined
// and its statistics published, or counted unmatched.
type LateLabels struct {
	// Source delivers the labels. Default (nil) none: with Stats, the
	// statistics of in-record labels alone are published.
	Source LabelSource
	// Topic is the labels topic, as the deltas name its offsets. Required
	// with Source.
	Topic string
	// Window is how long a scored record waits for its label, and a label
	// for its record, by their timestamps. Default (0)
	// DefaultLabelWindow, 24h.
	Window time.Duration
	// CacheBytes bounds the join store of all partitions together: about
	// 8·D bytes per record (D the model's projected features) plus
	// joinEntryOverhead; the oldest entries leave first. Default (0)
	// DefaultLabelCacheBytes, 256 MiB.
	CacheBytes int64
	// QualityWindow is the number of the last joined labels of a model
	// version its prequential quality is measured on. Default (0)
	// DefaultQualityWindow, 1000.
	QualityWindow int
	// Restore, when set, opens the records of a partition newly owned,
	// which the join store is filled with (scored again by the model in
	// service) before its labels are taken. Default (nil) none: the
	// labels of records scored before the assignment find none.
	Restore RestoreFunc
	// Stats, when set, receives the statistics of the joined labels, and
	// of in-record labels, every StatsInterval or StatsRows rows,
	// whichever comes first; a batch of records with labels is
	// acknowledged only once the statistics holding them are published.
	// Default (nil) the joined labels feed the Service's refits (if its
	// RefitPolicy refits).
	Stats StatsPublisher
	// StatsInterval and StatsRows say when the statistics are published
	// (or handed to the refits). Default (0) DefaultStatsInterval, 10s,
	// and DefaultStatsRows, 10000.
	StatsInterval time.Duration
	StatsRows     int
	// Replica names this replica in its deltas. Default ("") the host
	// name.
	Replica string
	// RereadLimit bounds, per partition, the labels read again after a
	// rebalance or a restart: the committed offset of the labels topic
	// stays at the oldest label waiting for its record, so the partition's
	// next owner reads every later label again (it dead-letters none
	// again, and skips those published). A label waiting further behind
	// the last label taken than this is given up (unmatched, evicted) at
	// the next commit, so that the committed offset moves on. Default (0)
	// DefaultLabelRereadLimit, 100000.
	RereadLimit int64
	// Folds, when more than 1, keeps the statistics of every delta as
	// that many fold sums, each row's fold chosen by its record id
	// (model.FoldOf), for a refitter that tunes (refit.Config.Tune and
	// Folds, which must be the same). Needs Stats. Default (0) one.
	Folds int
}

func (c LateLabels) resolve() (LateLabels, error) {
	switch {
	case c.Source == nil && c.Stats == nil:
		return c, errors.New("late labels: no label source and no statistics publisher")
	case c.Source != nil && c.Topic == "":
		return c, errors.New("late labels: no labels topic")
	case c.Folds < 0 || c.Folds > model.MaxFolds:
		return c, fmt.Errorf("late labels: %d folds: want 1 to %d", c.Folds, model.MaxFolds)
	case c.Folds > 1 && c.Stats == nil:
		return c, errors.New("late labels: fold sums are for the refitter: they need a statistics publisher")
	case c.Window < 0 || c.CacheBytes < 0 || c.QualityWindow < 0 || c.StatsInterval < 0 || c.StatsRows < 0:
		return c, fmt.Errorf("late labels: negative window %v, cache bytes %d, quality window %d, stats interval %v or stats rows %d",
			c.Window, c.CacheBytes, c.QualityWindow, c.StatsInterval, c.StatsRows)
	case c.RereadLimit < 0:
		return c, fmt.Errorf("late labels: negative reread limit %d", c.RereadLimit)
	}
	if c.RereadLimit == 0 {
		c.RereadLimit = DefaultLabelRereadLimit
	}
	if c.Window == 0 {
		c.Window = DefaultLabelWindow
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultLabelCacheBytes
	}
	if c.QualityWindow == 0 {
		c.QualityWindow = DefaultQualityWindow
	}
	if c.StatsInterval == 0 {
		c.StatsInterval = DefaultStatsInterval
	}
	if c.StatsRows == 0 {
		c.StatsRows = DefaultStatsRows
	}
	if c.Replica == "" {
		// A replica without a host name still publishes: its epoch tells
		// its deltas apart.
		c.Replica, _ = os.Hostname()
		if c.Replica == "" {
			c.Replica = "mvml-serve"
		}
	}
	return c, nil
}

// labelPartition is what a replica knows of a partition of the labels
// topic it owns.
type labelPartition struct {
	// next is the next offset to read: the group's committed offset at the
	// assignment, then the one after the last label taken; -1 when none
	// is known yet.
	next int64
	// handled is the offset below which every message was handled, as the
	// partition's last commit recorded it (a message below it that is not
	// a label was dead-lettered already); 0 when none is known.
	handled int64
	// skip holds the offsets a previous owner published.
	skip statsbus.Runs
}

// labelJoin is a Service's join of late labels (LateLabels): the join
// store, the prequential quality, the statistics gathered since the last
// publication and the partitions owned. Records come in from Run's
// goroutine, labels from the labels loop (run), assignments from the
// source's; mu guards the state they share (store, quality,
// ownedPartitions, statsGathered, served).
type labelJoin struct {
	cfg   LateLabels
	s     *Service
	epoch string
	now   func() time.Time
	publication
	// restoring counts the assignments restoring partitions.
	restoring atomic.Int32

	mu      sync.Mutex
	store   *joinStore
	quality *quality
	ownedPartitions
	statsGathered
	served *servedModel
}

// publication is how the publications of a labelJoin are ordered and
// signalled.
type publication struct {
	// published is signalled after every publication: batches of records
	// whose labels it holds may be acknowledged (publishedSeq, the
	// sequence number of the last delta published). local hands the
	// statistics to Run's refits when there is no StatsPublisher.
	published    chan struct{}
	publishedSeq atomic.Uint64
	local        chan *model.Accumulator
	// flushNow asks the labels loop for a publication (StatsRows reached
	// by in-record labels).
	flushNow chan struct{}
	// flushMu keeps publications, and their commits, in order.
	flushMu sync.Mutex
}

// ownedPartitions are the partitions a labelJoin owns, or holds between
// two generations of the group, and what it knows of each.
type ownedPartitions struct {
	// gen is the group generation whose labels are taken, valid while
	// assigned; labels holds its partitions of the labels topic, records
	// the offsets of its input partitions whose labels a previous owner
	// published.
	gen      int32
	assigned bool
	labels   map[int]*labelPartition
	records  map[int]statsbus.Runs
	// held are the partitions of generation heldGen, which ended, whose
	// store is kept until the next generation starts.
	held    map[int]bool
	heldGen int32
	// unrestored are the partitions owned, or held between generations,
	// whose records were not restored yet: a generation that ended
	// midway through the restore leaves some, which the next generation
	// restores if it keeps them. The replica is not ready while any is.
	unrestored map[int]bool
	// unassigned are the records scored while no generation was assigned,
	// and their bytes.
	unassigned      []*joinEntry
	unassignedBytes int64
}

// statsGathered are the statistics a labelJoin gathered since its last
// publication.
type statsGathered struct {
	// acc gathers the statistics of the lineage in service (accModel's)
	// since the last publication, of the label offsets in ranges; seq is
	// the sequence number of the delta it will be. sealed are those of an
	// older lineage, to be published first.
	acc      *model.Accumulator
	accModel *model.Model
	ranges   statsbus.Ranges
	seq      uint64
	sealed   []*statsbus.Delta
	lastPub  time.Time
}

func newLabelJoin(s *Service, cfg LateLabels, m *model.Model) *labelJoin {
	j := &labelJoin{
		cfg: cfg, s: s, epoch: statsbus.NewEpoch(), now: time.Now,
		publication:     publication{published: make(chan struct{}, 1), local: make(chan *model.Accumulator, 1), flushNow: make(chan struct{}, 1)},
		store:           newJoinStore(cfg.Window, cfg.CacheBytes),
		quality:         newQuality(cfg.QualityWindow, m.Spec.Task == schemas.Classification),
		ownedPartitions: ownedPartitions{labels: map[int]*labelPartition{}, records: map[int]statsbus.Runs{}},
		statsGathered:   statsGathered{accModel: m, seq: 1, lastPub: time.Now()},
	}
	j.acc = j.newAccumulator(m)
	return j
}

// newAccumulator is an empty accumulator on m of the join's folds.
func (j *labelJoin) newAccumulator(m *model.Model) *model.Accumulator {
	if j.cfg.Folds <= 1 {
		return m.NewAccumulator()
	}
	acc, err := m.NewFoldAccumulator(j.cfg.Folds)
	if err != nil {
		panic(err) // resolve checked the folds
	}
	return acc
}

// addProjected adds rows of projected features u, labels ys and record
// ids to the statistics: fold by fold when they keep several.
func (j *labelJoin) addProjected(ids []int64, u *mat.Dense, ys []float64) error {
	if j.acc.Folds() > 1 {
		return j.acc.AddProjectedFolds(ids, u, ys)
	}
	return j.acc.AddProjected(u, ys)
}

// servedOf is the model m as the join keeps it, shared by its records.
func (j *labelJoin) servedOf(m *model.Model) *servedModel {
	if j.served == nil || j.served.version != m.Version {
		j.served = &servedModel{version: m.Version, lineage: m.Lineage()}
	}
	return j.served
}

// assign takes the partitions of a new generation of the group: it
// restores the join store of every input partition from the records
// before the group's committed offset (scored again by the model in
// service), then learns which labels a previous owner already published,
// before the generation's labels are taken (ingest.KafkaConfig.OnAssign).
func (j *labelJoin) assign(ctx context.Context, a ingest.Assignment) error {
	j.restoring.Add(1)
	j.s.metrics.set(metricRestoring, 1)
	defer func() {
		if j.restoring.Add(-1) == 0 {
			j.s.metrics.set(metricRestoring, 0)
		}
	}()
	j.mu.Lock()
	// A partition this member owned in the generation just before (none
	// between: generations are numbered one after the other) was nobody
	// else's since: its store is kept as it is. The others are restored.
	// A partition held but not restored is restored again from scratch:
	// its store holds part of its records at most.
	kept := map[int]bool{}
	for p := range j.held {
		_, again := a.Records[p]
		if again && a.Generation == j.heldGen+1 && !j.unrestored[p] {
			kept[p] = true
		} else {
			j.store.drop(p)
		}
	}
	j.held = nil
	j.unrestored = map[int]bool{}
	if j.cfg.Restore != nil {
		for p, end := range a.Records {
			if end > 0 && !kept[p] {
				j.unrestored[p] = true
			}
		}
	}
	j.gen, j.assigned = a.Generation, true
	j.labels, j.records = map[int]*labelPartition{}, map[int]statsbus.Runs{}
	for p, committed := range a.Labels {
		j.labels[p] = &labelPartition{next: committed, handled: a.LabelsHandled[p]}
	}
	for p := range a.Records {
		j.records[p] = nil
	}
	// The records scored between generations are of this one's
	// partitions, or of the last one's that were not acknowledged in time
	// (delivered again, they are stored again).
	var out joinOutcome
	now := j.now()
	for _, r := range j.unassigned {
		if _, ours := a.Records[r.partition]; ours {
			out.merge(j.store.addRecord(r.partition, r, now))
		}
	}
	j.unassigned, j.unassignedBytes = nil, 0
	j.settle(out)
	j.mu.Unlock()
	if j.cfg.Restore != nil {
		from := j.now().Add(-j.cfg.Window)
		for _, p := range a.Partitions() {
			if end := a.Records[p]; end > 0 && !kept[p] {
				if err := j.restore(ctx, p, from, end); err != nil {
					if ctx.Err() != nil {
						j.s.cfg.Logger.Info("generation ended before its partitions were restored: the next generation that keeps them restores them",
							"generation", a.Generation, "not_restored", j.notRestored())
					}
					return fmt.Errorf("restoring the records of partition %d before offset %d: %w", p, end, err)
				}
				j.mu.Lock()
				delete(j.unrestored, p)
				j.mu.Unlock()
			}
		}
	}
	if j.cfg.Stats == nil {
		return nil
	}
	published, err := j.cfg.Stats.Published(ctx, j.s.Model().Lineage())
	if err != nil {
		return fmt.Errorf("reading the statistics published: %w", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	skipped := 0
	for p, lp := range j.labels {
		lp.skip = from(published.Runs(j.cfg.Topic, p), lp.next)
		skipped += int(lp.skip.Count())
	}
	for _, r := range published {
		if committed, ok := a.Records[r.Partition]; ok && r.Topic != j.cfg.Topic {
			j.records[r.Partition] = from(r.Runs, committed)
		}
	}
	if skipped > 0 {
		j.s.cfg.Logger.Info("labels published by the partitions' previous owner will be skipped", "generation", a.Generation, "labels", skipped)
	}
	return nil
}

// notRestored returns the partitions owned, or held between generations,
// whose records are not restored yet, in ascending order.
func (j *labelJoin) notRestored() []int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Sorted(maps.Keys(j.unrestored))
}

// from returns the offsets of runs at or above offset (all of them when
// offset is negative: nothing was committed).
func from(runs statsbus.Runs, offset int64) statsbus.Runs {
	var out statsbus.Runs
	for _, r := range runs {
		if r.To > offset {
			out.AddRun(statsbus.Run{From: max(r.From, offset), To: r.To})
		}
	}
	return out
}

// restore fills the join store of partition p with the records before
// offset end with a timestamp at or after from, scored by the model in
// service.
func (j *labelJoin) restore(ctx context.Context, p int, from time.Time, end int64) error {
	src, err := j.cfg.Restore(ctx, p, from, end)
	if err != nil {
		return err
	}
	defer src.Close()
	start := time.Now()
	var restored int64
	var sc restoreScorer
	for {
		b, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		m := j.s.Model()
		u, pred, skip := sc.score(m, b)
		restored += int64(j.scored(m, b, u, pred, skip))
		b.Record.Release()
	}
	j.s.metrics.add(metricRecordsRestored, restored)
	j.s.cfg.Logger.Info("partition restored for the join of late labels", "partition", p, "records", restored,
		"from", from, "to_offset", end, "seconds", time.Since(start).Seconds())
	return nil
}

// restoreScorer scores restored records: their projected features and
// predictions, as Run's batch scorer does.
type restoreScorer struct {
	model  *model.Model
	scorer *model.Scorer
	u, dec mat.Dense
	pred   []float64
}

func (r *restoreScorer) score(m *model.Model, b ingest.Batch) (*mat.Dense, []float64, []bool) {
	n := int(b.Record.NumRows())
	if n == 0 {
		return nil, nil, nil
	}
	if r.model != m {
		r.model, r.scorer = m, m.NewScorer()
	}
	r.pred = slices.Grow(r.pred[:0], n)[:n]
	_, skip := rows.Bad(m.Spec, b, false)
	unscorable := r.scorer.ProjectPredict(&r.u, r.pred, &r.dec, nil, model.ViewsOf(b.Record, len(m.Spec.Views)))
	for _, u := range unscorable {
		if skip == nil {
			skip = make([]bool, n)
		}
		skip[u.Row] = true
	}
	return &r.u, r.pred, skip
}

// revoke ends the generation of a (ingest.KafkaConfig.OnRevoke): no label
// of it is taken any more, the statistics gathered are published and the
// labels used are committed in it. The join store holds its partitions
// until the next generation says whether they stay with this member.
func (j *labelJoin) revoke(ctx context.Context, a ingest.Assignment) {
	j.mu.Lock()
	j.assigned = false
	j.mu.Unlock()
	if err := j.flushGeneration(ctx, a.Generation, a.Labels); err != nil {
		// The labels not committed are read again by the next owner, which
		// skips those published.
		j.s.cfg.Logger.Warn("statistics not published at the end of a generation: the next owner of its partitions takes their labels again", "generation", a.Generation, "err", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.held, j.heldGen = map[int]bool{}, a.Generation
	for p := range a.Records {
		j.held[p] = true
	}
	for p := range a.Labels {
		j.held[p] = true
	}
	j.labels, j.records = map[int]*labelPartition{}, map[int]statsbus.Runs{}
}

// scored adds the records of b that were scored (not marked in skip) and
// carry no label to the join store, with their projected features u (a
// row per record row), prediction and model m; a label waiting for one
// is joined at once. It returns how many it added. Records of partitions
// the replica does not own (any more) are left out; those scored between
// two generations wait for the next assignment to say whose they are.
func (j *labelJoin) scored(m *model.Model, b ingest.Batch, u *mat.Dense, pred []float64, skip []bool) int {
	n := int(b.Record.NumRows())
	if n == 0 {
		return 0
	}
	ids, labels := schemas.IDs(b.Record), schemas.Labels(b.Record)
	now := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	served := j.servedOf(m)
	var out joinOutcome
	added := 0
	for i := range n {
		if skip != nil && skip[i] || labels.IsValid(i) {
			continue
		}
		p := 0
		if b.Partitions != nil {
			p = int(b.Partitions[i])
		}
		_, owned := j.records[p]
		if j.assigned && !owned {
			continue
		}
		var at time.Time
		if b.Times != nil {
			at = b.Times[i]
		}
		e := &joinEntry{partition: p, id: ids.Value(i), at: at, offset: b.Rows[i], u: slices.Clone(u.RawRowView(i)), pred: pred[i], served: served}
		added++
		if !j.assigned {
			j.keepUnassigned(e)
			continue
		}
		out.merge(j.store.addRecord(p, e, now))
	}
	j.settle(out)
	return added
}

// keepUnassigned keeps a record scored while no generation is assigned
// (its generation's OnAssign has not run yet) until the next assignment
// says whether its partition is this member's, within the store's budget
// (j.mu held).
func (j *labelJoin) keepUnassigned(e *joinEntry) {
	j.unassigned = append(j.unassigned, e)
	j.unassignedBytes += int64(8*len(e.u)) + joinEntryOverhead
	for j.unassignedBytes > j.cfg.CacheBytes && len(j.unassigned) > 0 {
		j.unassignedBytes -= int64(8*len(j.unassigned[0].u)) + joinEntryOverhead
		j.unassigned = j.unassigned[1:]
		j.store.evictedRecords++
	}
}

// take handles a batch of labels (the labels loop's): each joins its
// record or waits for it, or is counted unmatched; the messages that are
// not labels are dead-lettered first.
func (j *labelJoin) take(ctx context.Context, b ingest.LabelBatch) error {
	j.mu.Lock()
	current := j.assigned && b.Generation == j.gen
	// A message that is not a label and was handled before (read again
	// after a rebalance or a restart) was dead-lettered then.
	var rejects []schemas.RowError
	for _, r := range b.Rejects {
		if lp := j.labels[rejectPartition(r)]; lp == nil || r.Row >= lp.handled {
			rejects = append(rejects, r)
		}
	}
	j.mu.Unlock()
	if !current {
		// Its generation is over: the partitions' next owner takes these
		// labels again.
		return nil
	}
	j.s.metrics.add(metricLabelsIn, int64(len(b.Labels)+len(b.Rejects)))
	if len(rejects) > 0 {
		if err := j.s.cfg.DeadLetters.WriteRejects(ctx, rejects); err != nil {
			return fmt.Errorf("labels: dead letters: %w", err)
		}
		j.s.metrics.add(metricLabelsDeadLettered, int64(len(rejects)))
	}
	now := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.assigned || b.Generation != j.gen {
		return nil
	}
	for _, r := range b.Rejects {
		if lp := j.labels[rejectPartition(r)]; lp != nil {
			lp.next = max(lp.next, r.Row+1)
		}
	}
	var out joinOutcome
	for _, l := range b.Labels {
		lp := j.labels[l.Partition]
		if lp == nil {
			continue
		}
		lp.next = max(lp.next, l.Offset+1)
		switch {
		case lp.skip.Contains(l.Offset):
			j.store.forget(l.Partition, l.ID)
			j.s.metrics.add(metricLabelsSkipped, 1)
		case l.Null:
			j.s.metrics.add(metricLabelsNull, 1)
			j.ranges.Add(j.cfg.Topic, l.Partition, l.Offset)
		default:
			out.merge(j.store.addLabel(l.Partition, l, now))
		}
	}
	out.merge(j.store.expire(now))
	j.settle(out)
	return nil
}

// rejectPartition is the partition of a reject located "topic/partition",
// -1 when it names none.
func rejectPartition(r schemas.RowError) int {
	p, err := strconv.Atoi(r.Source[strings.LastIndexByte(r.Source, '/')+1:])
	if err != nil {
		return -1
	}
	return p
}

// settle accounts for what a change of the store did to the labels (j.mu
// held): a joined label scores its record's prediction and, when the
// record was scored by the lineage of the statistics and the label is one
// the model can learn from, adds its row to them; an unmatched one is
// counted by reason. Every label settled is used: its offset goes into
// the ranges of the next delta.
func (j *labelJoin) settle(out joinOutcome) {
	var rows []*joinEntry
	var ys []float64
	lineage := j.acc.Lineage()
	// Without a publisher or refits, the statistics would have no use.
	gather := j.cfg.Stats != nil || j.s.cfg.Refit.enabled()
	for _, jn := range out.joined {
		l := jn.label
		j.quality.add(jn.record.served.version, jn.record.pred, l.Value)
		j.s.metrics.add(metricLabelsJoined, 1)
		j.ranges.Add(j.cfg.Topic, l.Partition, l.Offset)
		switch {
		case !gather:
		case jn.record.served.lineage != lineage:
			// Other features: the label counts for the quality alone.
		default:
			if err := j.accModel.CheckLabel(l.Value); err != nil {
				j.s.metrics.add(metricLabelsRejected, 1)
				j.s.cfg.Logger.Warn("label not used for the statistics", "topic", j.cfg.Topic, "partition", l.Partition, "offset", l.Offset,
					"id", l.ID, "reason", err)
				continue
			}
			rows, ys = append(rows, jn.record), append(ys, l.Value)
		}
	}
	for _, u := range out.unmatched {
		j.s.metrics.add(unmatchedMetric[u.reason], 1)
		j.ranges.Add(j.cfg.Topic, u.label.Partition, u.label.Offset)
	}
	if len(rows) > 0 {
		d := len(rows[0].u)
		u := mat.NewDense(len(rows), d, nil)
		ids := make([]int64, len(rows))
		for i, r := range rows {
			copy(u.RawRowView(i), r.u)
			ids[i] = r.id
		}
		if err := j.addProjected(ids, u, ys); err != nil {
			// Every label passed CheckLabel and every row was scored to a
			// finite number: whatever this is costs the statistics these
			// rows, not the service.
			j.s.cfg.Logger.Error("joined labels not used for the statistics", "rows", len(ys), "err", err)
		} else {
			j.s.metrics.add(metricLabelled, int64(len(ys)))
		}
	}
	j.gauges()
	if int(j.acc.Rows()) >= j.cfg.StatsRows {
		j.askFlush()
	}
}

var unmatchedMetric = map[string]metric{
	unmatchedExpired:   metricUnmatchedExpired,
	unmatchedEvicted:   metricUnmatchedEvicted,
	unmatchedNeverSeen: metricUnmatchedNeverSeen,
	unmatchedDuplicate: metricUnmatchedDuplicate,
}

// gauges sets the gauges of the join (j.mu held).
func (j *labelJoin) gauges() {
	records, labels := j.store.counts()
	j.s.metrics.set(metricJoinRecords, int64(records))
	j.s.metrics.set(metricLabelsWaiting, int64(labels))
	j.s.metrics.set(metricJoinBytes, j.store.used)
	j.s.metrics.set(metricJoinEvicted, j.store.evictedRecords)
	j.s.metrics.set(metricStatsUnpublished, int64(j.acc.Rows()))
}

func (j *labelJoin) askFlush() {
	select {
	case j.flushNow <- struct{}{}:
	default:
	}
}

// inRecord adds the rows of in-record labels (u their projected features,
// gathered on m, at offsets of the input topic's partitions) to the
// statistics to publish, unless a previous owner of their partition
// published them already, and returns the sequence number of the delta
// that will hold them: their batch is acknowledged once it is published.
// It is used with a StatsPublisher only.
func (j *labelJoin) inRecord(m *model.Model, topic string, u *mat.Dense, ys []float64, ids []int64, partitions []int, offsets []int64) (uint64, int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	keep := make([]int, 0, len(ys))
	for i := range ys {
		if !j.records[partitions[i]].Contains(offsets[i]) {
			keep = append(keep, i)
		} else {
			j.s.metrics.add(metricLabelsSkipped, 1)
		}
	}
	if len(keep) == 0 || m.Lineage() != j.acc.Lineage() {
		return 0, 0, nil
	}
	if len(keep) < len(ys) {
		sub := mat.NewDense(len(keep), u.RawMatrix().Cols, nil)
		kept := make([]float64, len(keep))
		keptIDs := make([]int64, len(keep))
		for r, i := range keep {
			copy(sub.RawRowView(r), u.RawRowView(i))
			kept[r], keptIDs[r] = ys[i], ids[i]
		}
		u, ys, ids = sub, kept, keptIDs
	}
	if err := j.addProjected(ids, u, ys); err != nil {
		return 0, 0, err
	}
	for _, i := range keep {
		j.ranges.Add(topic, partitions[i], offsets[i])
	}
	j.gauges()
	if int(j.acc.Rows()) >= j.cfg.StatsRows {
		j.askFlush()
	}
	return j.seq, len(ys), nil
}

// modelChanged follows the model put in service: statistics gathered on
// another lineage are sealed, to be published first, and gathering starts
// anew on m's.
func (j *labelJoin) modelChanged(m *model.Model) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if m.Lineage() == j.acc.Lineage() {
		j.accModel = m
		return
	}
	if j.cfg.Stats != nil && j.acc.Rows() > 0 {
		if d, err := j.delta(); err != nil {
			j.s.cfg.Logger.Error("statistics of the former lineage lost", "rows", j.acc.Rows(), "err", err)
		} else {
			j.sealed = append(j.sealed, d)
		}
	}
	j.acc, j.accModel = j.newAccumulator(m), m
	j.gauges()
	j.askFlush()
}

// delta makes the delta of the statistics gathered and starts the next
// (j.mu held).
func (j *labelJoin) delta() (*statsbus.Delta, error) {
	d, err := statsbus.New(j.acc, statsbus.Header{BaseVersion: j.accModel.Version, Replica: j.cfg.Replica, Epoch: j.epoch,
		Seq: j.seq, Created: j.now().UTC(), Ranges: j.ranges})
	if err != nil {
		return nil, err
	}
	j.seq++
	j.acc, j.ranges = j.newAccumulator(j.accModel), nil
	return d, nil
}

// flush publishes the statistics gathered (StatsPublisher) or hands them
// to the refits, then commits the labels used, in the generation in
// service.
func (j *labelJoin) flush(ctx context.Context) error {
	j.mu.Lock()
	gen, assigned := j.gen, j.assigned
	j.mu.Unlock()
	if !assigned {
		gen = -1
	}
	return j.flushGeneration(ctx, gen, nil)
}

// flushGeneration is flush in generation gen (-1: commit nothing); with
// labels given, it commits those partitions only.
func (j *labelJoin) flushGeneration(ctx context.Context, gen int32, only map[int]int64) error {
	j.flushMu.Lock()
	defer j.flushMu.Unlock()
	j.mu.Lock()
	j.settle(j.store.expire(j.now()))
	// The labels a new owner would read again are bounded: those waiting
	// too far behind are given up.
	for p, lp := range j.labels {
		if oldest, waiting := j.store.oldestWaiting(p); waiting && lp.next-oldest > j.cfg.RereadLimit {
			j.settle(j.store.giveUpLabels(p, lp.next-j.cfg.RereadLimit))
		}
	}
	// What is committed is what the statistics taken now account for,
	// with the offset below which every label was handled.
	commits, handled := map[int]int64{}, map[int]int64{}
	for p, lp := range j.labels {
		if _, ok := only[p]; only != nil && !ok || lp.next < 0 {
			continue
		}
		next := lp.next
		if oldest, waiting := j.store.oldestWaiting(p); waiting {
			next = min(next, oldest)
		}
		commits[p] = next
		lp.handled = max(lp.handled, lp.next)
		handled[p] = lp.handled
	}
	deltas := j.sealed
	j.sealed = nil
	var local *model.Accumulator
	var seq uint64
	switch {
	case j.cfg.Stats == nil:
		if j.acc.Rows() > 0 {
			local, j.acc = j.acc, j.newAccumulator(j.accModel)
		}
		j.ranges = nil
	case j.acc.Rows() > 0:
		d, err := j.delta()
		if err != nil {
			j.mu.Unlock()
			return fmt.Errorf("statistics delta: %w", err)
		}
		deltas = append(deltas, d)
	default:
		// No row to publish: the labels used (unmatched, or joined to
		// another lineage) need no delta to be committed.
		j.ranges = nil
	}
	seq = j.seq - 1
	j.lastPub = j.now()
	j.gauges()
	j.mu.Unlock()

	for _, d := range deltas {
		if err := j.cfg.Stats.Publish(ctx, d); err != nil {
			return fmt.Errorf("publishing statistics delta %s (%d rows): %w", d.ID(), d.Rows, err)
		}
		j.s.metrics.add(metricStatsDeltas, 1)
		j.s.metrics.add(metricStatsRows, d.Rows)
	}
	if local != nil {
		select {
		case j.local <- local:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	j.publishedSeq.Store(seq)
	select {
	case j.published <- struct{}{}:
	default:
	}
	if gen < 0 || len(commits) == 0 || j.cfg.Source == nil {
		return nil
	}
	if err := j.cfg.Source.CommitLabelsHandled(ctx, gen, commits, handled); err != nil {
		return fmt.Errorf("committing labels: %w", err)
	}
	return nil
}

// flushGraced is flush for the labels loop: a publication under way when
// the service stops is finished within the shutdown grace, as a batch in
// hand is, and the stop's last flush publishes what is left after it.
// Cancelled with the loop, it would drop the delta it had taken.
func (j *labelJoin) flushGraced(ctx context.Context) error {
	graced, cancel := j.s.withGrace(ctx)
	defer cancel()
	stopped := context.AfterFunc(ctx, func() { j.s.events.flushesStopped.Add(1) })
	defer stopped()
	return j.flush(graced)
}

// due says whether the statistics are due for publication by time.
func (j *labelJoin) due() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.now().Sub(j.lastPub) >= j.cfg.StatsInterval
}

// run is the labels loop: it takes the batches of labels, expires the
// join store and publishes the statistics when due, until ctx ends (nil)
// or something fails that stops the service.
func (j *labelJoin) run(ctx context.Context) error {
	batches := make(chan ingest.LabelBatch)
	fetchErr := make(chan error, 1)
	fetchCtx, stopFetching := context.WithCancel(ctx)
	var fetching sync.WaitGroup
	defer func() {
		stopFetching()
		fetching.Wait()
	}()
	fetch := func() {
		for {
			b, err := j.cfg.Source.NextLabels(fetchCtx)
			if err != nil {
				if fetchCtx.Err() == nil {
					fetchErr <- err
				}
				return
			}
			select {
			case batches <- b:
			case <-fetchCtx.Done():
				return
			}
		}
	}
	if j.cfg.Source != nil {
		fetching.Go(fetch)
	}
	tick := time.NewTicker(min(j.cfg.StatsInterval, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-fetchErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("labels: %w", err)
		case b := <-batches:
			if err := j.take(ctx, b); err != nil {
				return err
			}
		case <-j.flushNow:
			if err := j.flushGraced(ctx); err != nil {
				return err
			}
		case <-tick.C:
			j.mu.Lock()
			j.settle(j.store.expire(j.now()))
			j.mu.Unlock()
			if j.due() {
				if err := j.flushGraced(ctx); err != nil {
					return err
				}
			}
		}
	}
}

// qualitySnapshot is the prequential quality by version.
func (j *labelJoin) qualitySnapshot() []VersionQuality {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.quality.snapshot()
}
