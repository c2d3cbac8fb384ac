package serve

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/twmb/franz-go/pkg/kmsg"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
	"github.com/mvml/mvml/statsbus"
)

// lateParts is the number of partitions of the input and labels topics of
// these tests.
const lateParts = 4

// recordMessages are the records of d (unlabelled), each to the partition
// of its id.
func recordMessages(t *testing.T, spec *schemas.ViewSpec, d *dataset, lo, hi int) []kafkatest.Message {
	t.Helper()
	values := jsonRecords(t, spec, d)
	var msgs []kafkatest.Message
	for i := lo; i < hi; i++ {
		msgs = append(msgs, kafkatest.Message{Partition: int(d.IDs[i] % lateParts), Key: fmt.Append(nil, d.IDs[i]), Value: values[i]})
	}
	return msgs
}

// labelMessage is the label of id, to the partition of its record.
func labelMessage(id int64, label string) kafkatest.Message {
	return kafkatest.Message{Partition: int(id % lateParts), Key: fmt.Append(nil, id), Value: fmt.Appendf(nil, `{"id": %d, "label": %s}`, id, label)}
}

// labelMessages are the labels of d's rows lo..hi-1.
func labelMessages(d *dataset, lo, hi int) []kafkatest.Message {
	var msgs []kafkatest.Message
	for i := lo; i < hi; i++ {
		msgs = append(msgs, labelMessage(d.IDs[i], fmt.Sprint(d.Labels[i])))
	}
	return msgs
}

// startLate starts a runner with cfg's join of late labels on cluster c
// (input "in", labels "labels", output "out", dead letters "dead", group
// "g"); stop cancels it and returns its counters and error.
func startLate(t *testing.T, c *kafkatest.Cluster, cfg KafkaConfig) (r *KafkaRunner, stop func() (Stats, error)) {
	t.Helper()
	cfg.Conn = kafkaconn.Config{Brokers: c.Brokers}
	cfg.Topic, cfg.Group, cfg.OutputTopic, cfg.DeadLetterTopic = "in", "g", "out", "dead"
	cfg.MaxWait = 20 * time.Millisecond
	if cfg.LabelsTopic == "" {
		cfg.LabelsTopic = "labels"
	}
	cfg.Options.BatchSize = 32
	r, err := NewKafkaRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop = func() (Stats, error) {
		if stopped {
			return r.Service().Stats(), nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return r.Service().Stats(), err
		case <-time.After(30 * time.Second):
			t.Fatal("the runner did not stop")
			return Stats{}, nil
		}
	}
	t.Cleanup(func() { stop() })
	return r, stop
}

// waitStats waits until the runner's counters satisfy cond.
func waitStats(t *testing.T, r *KafkaRunner, what string, cond func(Stats) bool) Stats {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := r.Service().Stats()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %+v", what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// labelsEnd is the end offset of every partition of the labels topic.
func partitionEnds(t *testing.T, c *kafkatest.Cluster, topic string) []int64 {
	t.Helper()
	ends := make([]int64, c.Partitions(t, topic))
	for _, m := range c.ConsumeAll(t, topic) {
		ends[m.Partition] = max(ends[m.Partition], m.Offset+1)
	}
	return ends
}

func equalOffsets(a, b []int64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// Labels that arrive after their records, and before them, are joined;
// those without a record are counted by reason (never seen within the
// window, a second label of a joined record), a null label is counted as
// such and a message that is not a label is dead-lettered; every label
// is committed once used. The prequential accuracy of the model is that
// of its predictions against the labels, and the joined labels feed the
// statistics of the service's refits.
func TestServeJoinsLateLabels(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 200, 4)
	c := kafkatest.Start(t, lateParts, "in", "labels", "out", "dead")
	// The labels of rows 150..199 come before their records.
	c.Produce(t, "labels", labelMessages(d, 150, 200)...)
	c.Produce(t, "in", recordMessages(t, spec, d, 0, 150)...)
	r, stop := startLate(t, c, KafkaConfig{Model: m, Refit: RefitPolicy{Rows: 1000},
		Labels: LateLabels{Window: 3 * time.Second, StatsInterval: 100 * time.Millisecond, StatsRows: 64}})
	waitStats(t, r, "the first records scored", func(st Stats) bool { return st.In >= 150 })
	c.Produce(t, "labels", labelMessages(d, 0, 100)...)
	c.Produce(t, "labels", labelMessage(d.IDs[0], "1"), labelMessage(d.IDs[100], "null"), labelMessage(99_999, "0"),
		kafkatest.Message{Partition: 1, Value: []byte(`{"id": 5, "label": "one"}`)})
	c.Produce(t, "in", recordMessages(t, spec, d, 150, 200)...)
	st := waitStats(t, r, "every label used", func(st Stats) bool {
		return st.LabelsJoined == 150 && st.LabelsUnmatchedNeverSeen == 1 && st.LabelsUnmatchedDuplicate == 1 &&
			st.LabelsNull == 1 && st.LabelsDeadLettered == 1 && st.Accumulated == 150
	})
	if st.LabelsIn != 50+100+4 || st.LabelsUnmatchedExpired+st.LabelsUnmatchedEvicted != 0 || st.LabelsWaiting != 0 || st.Labelled != 150 {
		t.Errorf("labels: %+v", st)
	}
	// The model's predictions of the rows labelled, against their labels.
	_, pred := pipelinetest.ExpectedScores(m, d)
	hits := 0
	for i := range 200 {
		if i < 100 || i >= 150 {
			if pred[i] == d.Labels[i] {
				hits++
			}
		}
	}
	var q *VersionQuality
	for i := range st.Quality {
		if st.Quality[i].Version == m.Version {
			q = &st.Quality[i]
		}
	}
	if q == nil || q.Labels != 150 || q.Accuracy == nil || math.Abs(*q.Accuracy-float64(hits)/150) > 1e-12 {
		t.Errorf("quality %+v, want the accuracy %v of version %s over 150 labels", st.Quality, float64(hits)/150, m.Version)
	}
	want := partitionEnds(t, c, "labels")
	waitStats(t, r, "the labels committed", func(Stats) bool { return equalOffsets(c.CommittedOffsets(t, "g", "labels"), want) })
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	if dead := c.ConsumeAll(t, "dead"); len(dead) != 1 || !strings.Contains(string(dead[0].Value), `"one"`) {
		t.Errorf("dead letters %v", dead)
	}
}

// With a stats topic, the statistics of the joined labels are published
// as deltas (only rows of the model's lineage, each label once), and the
// labels are committed after them: the deltas add up to the statistics of
// the rows labelled, computed from their views.
func TestServePublishesStatistics(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 200, 5)
	c := kafkatest.Start(t, lateParts, "in", "labels", "out", "dead")
	for _, topic := range []string{"stats", "models"} {
		if err := c.Fake().CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	models := pipelinetest.OpenModelTopic(t, c)
	if _, err := models.Publish(context.Background(), m, registry.Meta{Role: registry.RoleTrain}, true); err != nil {
		t.Fatal(err)
	}
	c.Produce(t, "in", recordMessages(t, spec, d, 0, 200)...)
	r, stop := startLate(t, c, KafkaConfig{Model: m, Models: models, StatsTopic: "stats",
		Labels: LateLabels{StatsInterval: 200 * time.Millisecond, StatsRows: 64, Replica: "serve-a"}})
	waitStats(t, r, "the records scored", func(st Stats) bool { return st.In >= 200 })
	c.Produce(t, "labels", labelMessages(d, 0, 200)...)
	want := partitionEnds(t, c, "labels")
	st := waitStats(t, r, "every label published", func(st Stats) bool {
		return st.StatsRows == 200 && equalOffsets(c.CommittedOffsets(t, "g", "labels"), want)
	})
	if st.LabelsJoined != 200 || st.StatsDeltas < 2 {
		t.Errorf("stats %+v: want 200 labels joined in at least 2 deltas", st)
	}
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	total, published := readDeltas(t, c, m)
	if published.Count() != 200 || total.Rows() != 200 {
		t.Fatalf("the deltas hold %d label offsets and %v rows, want 200", published.Count(), total.Rows())
	}
	for p := range lateParts {
		if runs := published.Runs("labels", p); len(runs) != 1 || runs[0].From != 0 || runs[0].To != want[p] {
			t.Errorf("labels/%d: offsets %v published, want [0,%d)", p, runs, want[p])
		}
	}
	// The statistics of the rows from their views.
	direct := m.NewAccumulator()
	if err := direct.Add(d.Matrices(), d.Labels); err != nil {
		t.Fatal(err)
	}
	checkSameStats(t, total, direct)
}

// A stats topic that refuses a write for a moment (a leader election)
// costs the replica no restart: the delta is written again, and every
// label is published once.
func TestServeRetriesStatsPublication(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 100, 6)
	c, models := statsCluster(t, m)
	var refused atomic.Int32
	c.FailProduce("stats", notLeader, func([]int32) bool { return refused.Add(1) <= 2 })
	c.Produce(t, "in", recordMessages(t, spec, d, 0, 100)...)
	r, stop := startLate(t, c, KafkaConfig{Model: m, Models: models, StatsTopic: "stats",
		Labels: LateLabels{StatsInterval: 100 * time.Millisecond, StatsRows: 1000, Replica: "serve-a"}})
	waitStats(t, r, "the records scored", func(st Stats) bool { return st.In >= 100 })
	c.Produce(t, "labels", labelMessages(d, 0, 100)...)
	want := partitionEnds(t, c, "labels")
	waitStats(t, r, "every label published", func(st Stats) bool {
		return st.StatsRows == 100 && equalOffsets(c.CommittedOffsets(t, "g", "labels"), want)
	})
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	if refused.Load() <= 2 {
		t.Fatalf("%d writes to the stats topic, want the two refused and more", refused.Load())
	}
	if _, published := readDeltas(t, c, m); published.Count() != 100 {
		t.Errorf("the deltas hold %d label offsets, want 100", published.Count())
	}
}

// A stop that comes while the labels loop is publishing a delta lets that
// publication finish, within the shutdown grace, and then publishes the
// rest: a graceful stop leaves no joined label unpublished (it used to
// cancel the publication under way, skip the last one and drop both
// deltas' statistics until the labels were read again).
func TestServeStopFinishesPublicationUnderWay(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 100, 6)
	c, models := statsCluster(t, m)
	held := make(chan struct{})
	release := make(chan struct{})
	var holding atomic.Bool
	fake := c.Fake()
	fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if req.(*kmsg.ProduceRequest).Topics[0].Topic == "stats" && holding.CompareAndSwap(false, true) {
			close(held)
			fake.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	c.Produce(t, "in", recordMessages(t, spec, d, 0, 100)...)
	r, stop := startLate(t, c, KafkaConfig{Model: m, Models: models, StatsTopic: "stats",
		Labels: LateLabels{StatsInterval: time.Hour, StatsRows: 40, Replica: "serve-a"}})
	waitStats(t, r, "the records scored", func(st Stats) bool { return st.In >= 100 })
	c.Produce(t, "labels", labelMessages(d, 0, 100)...)
	<-held
	stopped := make(chan error, 1)
	go func() {
		_, err := stop()
		stopped <- err
	}()
	pipelinetest.WaitFor(t, "the stop under way, the delta held", func() bool { return r.Service().events.flushesStopped.Load() > 0 })
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	st := r.Service().Stats()
	if st.LabelsJoined < 40 || st.StatsRows != st.LabelsJoined {
		t.Errorf("%d labels joined, %d published by the stop; want at least 40, all", st.LabelsJoined, st.StatsRows)
	}
	if _, published := readDeltas(t, c, m); published.Count() != st.LabelsJoined {
		t.Errorf("the deltas hold %d label offsets, want %d", published.Count(), st.LabelsJoined)
	}
}

// readDeltas reads every delta of the stats topic, checks that no label is
// in two, and returns their statistics merged and their label offsets.
func readDeltas(t *testing.T, c *kafkatest.Cluster, m *model.Model) (*model.Accumulator, statsbus.Ranges) {
	t.Helper()
	total := m.NewAccumulator()
	var published statsbus.Ranges
	stream := statsbus.NewStream()
	for _, msg := range c.ConsumeAll(t, "stats") {
		delta, _, err := stream.Add(connMessage(msg))
		if err != nil {
			t.Fatal(err)
		}
		if delta == nil {
			continue
		}
		if r, twice := published.Overlap(delta.Ranges); twice {
			t.Errorf("delta %s holds labels %v published before", delta.ID(), r)
		}
		published.AddAll(delta.Ranges)
		acc, err := delta.Accumulator(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := total.Merge(acc); err != nil {
			t.Fatal(err)
		}
	}
	return total, published
}

// checkSameStats compares two accumulators' refits: the same statistics
// give the same model.
func checkSameStats(t *testing.T, got, want *model.Accumulator) {
	t.Helper()
	fit := model.DefaultConfig()
	fit.Mode = model.ModeIdentity
	a, err := got.RefitCold(context.Background(), fit)
	if err != nil {
		t.Fatal(err)
	}
	b, err := want.RefitCold(context.Background(), fit)
	if err != nil {
		t.Fatal(err)
	}
	d := makeData(a.Spec, 50, 99)
	var da, db mat.Dense
	a.NewScorer().Score(&da, nil, d.Matrices())
	b.NewScorer().Score(&db, nil, d.Matrices())
	if !mat.EqualApprox(&da, &db, 1e-9) {
		t.Errorf("the statistics published refit to other decisions than those of the rows:\n%v\n%v", mat.Formatted(da.Slice(0, 3, 0, 1)), mat.Formatted(db.Slice(0, 3, 0, 1)))
	}
}

// statsCluster is a cluster with the input, labels, output and dead-letter
// topics of lateParts partitions, and the stats and model topics of one,
// the model m current there.
func statsCluster(t *testing.T, m *model.Model) (*kafkatest.Cluster, *registry.Kafka) {
	t.Helper()
	c := kafkatest.Start(t, lateParts, "in", "labels", "out", "dead")
	for _, topic := range []string{"stats", "models"} {
		if err := c.Fake().CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	models := pipelinetest.OpenModelTopic(t, c)
	if _, err := models.Publish(context.Background(), m, registry.Meta{Role: registry.RoleTrain}, true); err != nil {
		t.Fatal(err)
	}
	return c, models
}

// A replica that takes over partitions restores their records scored
// before the committed offset (so that their late labels are joined, not
// lost) and skips the labels a previous owner published without
// committing them, whether the refitter merged them into its checkpoint
// already or they are still on the stats topic: no label is counted
// twice, none is lost.
func TestServeTakesOverPartitions(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 100, 6)
	for _, inCheckpoint := range []bool{false, true} {
		t.Run(fmt.Sprintf("in checkpoint=%t", inCheckpoint), func(t *testing.T) {
			c, models := statsCluster(t, m)
			c.Produce(t, "in", recordMessages(t, spec, d, 0, 100)...)
			// The records are scored and committed by a first owner.
			r, stop := startLate(t, c, KafkaConfig{Model: m, Models: models, StatsTopic: "stats"})
			ends := partitionEnds(t, c, "in")
			waitStats(t, r, "the records committed", func(Stats) bool { return equalOffsets(c.CommittedOffsets(t, "g", "in"), ends) })
			if _, err := stop(); err != nil {
				t.Fatal(err)
			}
			// Their labels come; a previous owner of the labels joined the
			// first 5 of every partition, published them and died before
			// it committed them.
			c.Produce(t, "labels", labelMessages(d, 0, 100)...)
			var early statsbus.Ranges
			acc := m.NewAccumulator()
			var views [][]float64
			var ys []float64
			perPartition := map[int]int{}
			for _, msg := range c.ConsumeAll(t, "labels") {
				if msg.Offset < 5 {
					early.Add("labels", msg.Partition, msg.Offset)
				}
			}
			// The labels of a partition are in the order of their ids.
			for i := range 100 {
				p := int(d.IDs[i] % lateParts)
				if perPartition[p] < 5 {
					perPartition[p]++
					views = append(views, rowOf(d, i))
					ys = append(ys, d.Labels[i])
				}
			}
			if err := acc.Add(matricesOf(d, views), ys); err != nil {
				t.Fatal(err)
			}
			delta, err := statsbus.New(acc, statsbus.Header{BaseVersion: m.Version, Replica: "dead-one", Epoch: "e", Seq: 1, Created: time.Now(), Ranges: early})
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := statsbus.Messages(delta, 0)
			if err != nil {
				t.Fatal(err)
			}
			c.Produce(t, "stats", kafkatest.Message{Key: msgs[0].Key, Value: msgs[0].Value})
			if inCheckpoint {
				var ledger statsbus.Ledger
				ledger.Add(&delta.Header)
				cp, err := statsbus.NewCheckpoint(acc, statsbus.CheckpointHeader{NextSOffset: 1, Ledger: ledger})
				if err != nil {
					t.Fatal(err)
				}
				data, err := cp.Encode()
				if err != nil {
					t.Fatal(err)
				}
				if err := models.PutCheckpoint(context.Background(), m.Lineage(), data); err != nil {
					t.Fatal(err)
				}
			}
			r, stop = startLate(t, c, KafkaConfig{Model: m, Models: models, StatsTopic: "stats",
				Labels: LateLabels{StatsInterval: 100 * time.Millisecond, Replica: "new-one"}})
			labelEnds := partitionEnds(t, c, "labels")
			st := waitStats(t, r, "the labels published", func(st Stats) bool {
				return st.StatsRows == 80 && equalOffsets(c.CommittedOffsets(t, "g", "labels"), labelEnds)
			})
			if st.RecordsRestored != 100 || st.LabelsSkipped != 20 || st.LabelsJoined != 80 || st.In != 0 {
				t.Errorf("stats %+v: want 100 records restored, 20 labels skipped, 80 joined, no record taken", st)
			}
			if _, err := stop(); err != nil {
				t.Fatal(err)
			}
			total, published := readDeltas(t, c, m)
			direct := m.NewAccumulator()
			if err := direct.Add(d.Matrices(), d.Labels); err != nil {
				t.Fatal(err)
			}
			if published.Count() != 100 || total.Rows() != 100 {
				t.Fatalf("the deltas hold %d labels and %v rows, want 100", published.Count(), total.Rows())
			}
			checkSameStats(t, total, direct)
		})
	}
}

// rowOf is row i of d, its views' values one after the other.
func rowOf(d *dataset, i int) []float64 {
	var row []float64
	for l := range d.Views {
		row = append(row, d.Row(l, i)...)
	}
	return row
}

// matricesOf are rows (as rowOf gives them) as one matrix per view of d.
func matricesOf(d *dataset, rows [][]float64) []*mat.Dense {
	out := make([]*mat.Dense, len(d.Dims))
	off := 0
	for l, dim := range d.Dims {
		out[l] = mat.NewDense(len(rows), dim, nil)
		for i, row := range rows {
			copy(out[l].RawRowView(i), row[off:off+dim])
		}
		off += dim
	}
	return out
}

// With a stats topic, a batch of records with labels is committed only
// once the statistics holding its labels are published: none is, until
// the service stops and publishes them, then commits the records.
func TestServeCommitsInRecordLabelsAfterPublication(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 60, 7)
	c, models := statsCluster(t, m)
	var msgs []kafkatest.Message
	for i, v := range labelledRecords(t, spec, d) {
		msgs = append(msgs, kafkatest.Message{Partition: int(d.IDs[i] % lateParts), Value: v})
	}
	c.Produce(t, "in", msgs...)
	r, stop := startLate(t, c, KafkaConfig{Model: m, Models: models, StatsTopic: "stats", LabelsTopic: "labels",
		Labels: LateLabels{StatsInterval: time.Hour, StatsRows: 1_000_000}})
	waitStats(t, r, "the records taken", func(st Stats) bool { return st.In == 60 && st.StatsUnpublished == 60 })
	pipelinetest.WaitFor(t, "the records held back for their statistics", func() bool { return r.Service().events.heldForStats.Load() == 60 })
	if got := c.CommittedOffsets(t, "g", "in"); !equalOffsets(got, []int64{-1, -1, -1, -1}) {
		t.Errorf("records committed at %v before their statistics were published", got)
	}
	st, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	if st.Scored != 60 || st.StatsRows != 60 || st.StatsDeltas != 1 {
		t.Errorf("stats %+v: want 60 scored and published in one delta", st)
	}
	if got, want := c.CommittedOffsets(t, "g", "in"), partitionEnds(t, c, "in"); !equalOffsets(got, want) {
		t.Errorf("records committed at %v, want %v", got, want)
	}
	total, published := readDeltas(t, c, m)
	if published.Count() != 60 || len(published.Runs("in", 0)) != 1 || total.Rows() != 60 {
		t.Errorf("the delta holds offsets %v and %v rows", published, total.Rows())
	}
}

// labelledRecords are the rows of d as JSON records with their labels.
func labelledRecords(t *testing.T, spec *schemas.ViewSpec, d *dataset) [][]byte {
	t.Helper()
	values := jsonRecords(t, spec, d)
	for i := range values {
		values[i] = fmt.Appendf(nil, `{"label": %v, %s`, d.Labels[i], values[i][1:])
	}
	return values
}

// When a second replica joins, the first keeps the store of the
// partitions it keeps (no restore) and the second restores those it
// takes; labels waiting for their record wait on across the rebalance,
// and every label is joined and published once.
func TestServeRebalanceKeepsPartitions(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 200, 8)
	c, models := statsCluster(t, m)
	cfg := func(replica string) KafkaConfig {
		return KafkaConfig{Model: m, Models: models, StatsTopic: "stats",
			Labels: LateLabels{StatsInterval: 100 * time.Millisecond, Replica: replica}}
	}
	// Rows 150..199 have their labels first; rows 0..99 their records.
	c.Produce(t, "labels", labelMessages(d, 150, 200)...)
	c.Produce(t, "in", recordMessages(t, spec, d, 0, 100)...)
	a, stopA := startLate(t, c, cfg("a"))
	waitStats(t, a, "the first records and labels taken", func(st Stats) bool { return st.In == 100 && st.LabelsWaiting == 50 })
	b, stopB := startLate(t, c, cfg("b"))
	waitStats(t, b, "the second replica's partitions", func(st Stats) bool { return st.RecordsRestored > 0 && st.Restoring == 0 })
	waitStats(t, a, "the first replica's half", func(st Stats) bool { return st.LabelsWaiting < 50 })
	c.Produce(t, "labels", labelMessages(d, 0, 100)...)
	c.Produce(t, "in", recordMessages(t, spec, d, 100, 200)...)
	ends := partitionEnds(t, c, "labels")
	waitStats(t, a, "every label published", func(Stats) bool {
		sa, sb := a.Service().Stats(), b.Service().Stats()
		return sa.StatsRows+sb.StatsRows == 150 && equalOffsets(c.CommittedOffsets(t, "g", "labels"), ends)
	})
	sa, err := stopA()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := stopB()
	if err != nil {
		t.Fatal(err)
	}
	if sa.RecordsRestored != 0 || sb.RecordsRestored == 0 || sb.RecordsRestored > 100 {
		t.Errorf("records restored: %d by the replica that kept its partitions, %d by the one that took some of 100", sa.RecordsRestored, sb.RecordsRestored)
	}
	if unmatched := sa.LabelsUnmatchedDuplicate + sb.LabelsUnmatchedDuplicate + sa.LabelsUnmatchedNeverSeen + sb.LabelsUnmatchedNeverSeen; unmatched != 0 {
		t.Errorf("%d labels unmatched: %+v %+v", unmatched, sa, sb)
	}
	total, published := readDeltas(t, c, m)
	if published.Count() != 150 || total.Rows() != 150 {
		t.Fatalf("the deltas hold %d labels and %v rows, want 150", published.Count(), total.Rows())
	}
	direct := m.NewAccumulator()
	labelled := &dataset{IDs: d.IDs[:100], Labels: d.Labels[:100], Views: pipelinetest.PrefixRows(d, 100), Dims: d.Dims}
	if err := direct.Add(labelled.Matrices(), labelled.Labels); err != nil {
		t.Fatal(err)
	}
	rest := &dataset{IDs: d.IDs[150:], Labels: d.Labels[150:], Dims: d.Dims}
	for l := range d.Views {
		rest.Views = append(rest.Views, d.Views[l][150*d.Dims[l]:])
	}
	if err := direct.Add(rest.Matrices(), rest.Labels); err != nil {
		t.Fatal(err)
	}
	checkSameStats(t, total, direct)
}

// noLabels is a LabelSource of a test that hands labels to the join
// itself.
type noLabels struct{}

func (noLabels) NextLabels(ctx context.Context) (ingest.LabelBatch, error) {
	<-ctx.Done()
	return ingest.LabelBatch{}, ctx.Err()
}
func (noLabels) CommitLabelsHandled(context.Context, int32, map[int]int64, map[int]int64) error {
	return nil
}

// Records scored before their generation's assignment (the source
// delivers records as soon as the generation starts) are kept for it:
// those of its partitions are joined with their labels, the others are
// dropped.
func TestJoinKeepsRecordsScoredBeforeAssignment(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	svc, err := NewService(Config{Model: m, Source: blockingSource{}, Output: discardSink{}, DeadLetters: sink.NewRejects(io.Discard),
		Labels: &LateLabels{Source: noLabels{}, Topic: "labels"}})
	if err != nil {
		t.Fatal(err)
	}
	j := svc.join
	d := makeData(spec, 4, 2)
	rec := withoutLabels(spec, pipelinetest.InputRecord(memory.NewGoAllocator(), spec, d, 0, 4))
	defer rec.Release()
	b := ingest.Batch{Record: rec, Source: "in", Rows: []int64{10, 11, 12, 13}, Partitions: []int32{0, 1, 0, 1}}
	var u, dec mat.Dense
	pred := make([]float64, 4)
	m.NewScorer().ProjectPredict(&u, pred, &dec, nil, model.ViewsOf(rec, len(spec.Views)))
	if n := j.scored(m, b, &u, pred, nil); n != 4 {
		t.Fatalf("%d records kept of 4", n)
	}
	a := ingest.Assignment{Generation: 1, Records: map[int]int64{0: 10}, Labels: map[int]int64{0: 0}}
	if err := j.assign(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	batch := ingest.LabelBatch{Topic: "labels", Generation: 1}
	for i, id := range d.IDs {
		batch.Labels = append(batch.Labels, ingest.Label{Partition: 0, Offset: int64(i), ID: id, Value: d.Labels[i]})
	}
	if err := j.take(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	st := svc.Stats()
	if st.LabelsJoined != 2 || st.LabelsWaiting != 2 || st.JoinRecords != 0 {
		t.Errorf("%d labels joined, %d waiting, %d records waiting; want the 2 of partition 0 joined, the 2 others waiting for records never kept",
			st.LabelsJoined, st.LabelsWaiting, st.JoinRecords)
	}
}

// gateSource is a source whose first Next waits for open to be closed,
// then ends.
type gateSource struct{ open chan struct{} }

func (g gateSource) Next(ctx context.Context) (ingest.Batch, error) {
	select {
	case <-g.open:
		return ingest.Batch{}, io.EOF
	case <-ctx.Done():
		return ingest.Batch{}, ctx.Err()
	}
}
func (gateSource) Close() error { return nil }

// /readyz answers 503 while the records of newly owned partitions are
// restored, and 200 again once they are.
func TestServeNotReadyWhileRestoring(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	gate := gateSource{open: make(chan struct{})}
	svc, err := NewService(Config{Model: m, Source: blockingSource{}, Output: discardSink{}, DeadLetters: sink.NewRejects(io.Discard),
		Labels: &LateLabels{Source: noLabels{}, Topic: "labels", Restore: func(context.Context, int, time.Time, int64) (ingest.Source, error) {
			return gate, nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	readyz := func() (int, string) {
		rec := httptest.NewRecorder()
		svc.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("the service to run", func() bool { code, _ := readyz(); return code == 200 })
	assigned := make(chan error, 1)
	go func() {
		assigned <- svc.join.assign(ctx, ingest.Assignment{Generation: 1, Records: map[int]int64{0: 100}, Labels: map[int]int64{0: 7}})
	}()
	waitFor("the restore to start", func() bool { return svc.Stats().Restoring == 1 })
	if code, body := readyz(); code != 503 || !strings.Contains(body, "restoring") {
		t.Errorf("readyz while restoring: %d %q, want 503 saying so", code, body)
	}
	close(gate.open)
	if err := <-assigned; err != nil {
		t.Fatal(err)
	}
	if code, body := readyz(); code != 200 || svc.Stats().Restoring != 0 {
		t.Errorf("readyz once restored: %d %q", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A label that waited its whole window is counted unmatched when the
// statistics are flushed, before its offset is committed past.
func TestJoinCountsExpiredLabelsAtFlush(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	svc, err := NewService(Config{Model: m, Source: blockingSource{}, Output: discardSink{}, DeadLetters: sink.NewRejects(io.Discard),
		Labels: &LateLabels{Source: noLabels{}, Topic: "labels", Window: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	j := svc.join
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	j.now = func() time.Time { return now }
	if err := j.assign(context.Background(), ingest.Assignment{Generation: 1, Records: map[int]int64{0: -1}, Labels: map[int]int64{0: -1}}); err != nil {
		t.Fatal(err)
	}
	batch := ingest.LabelBatch{Topic: "labels", Generation: 1, Labels: []ingest.Label{{Partition: 0, Offset: 0, ID: 5, Value: 1, Time: now}}}
	if err := j.take(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if err := j.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := svc.Stats(); st.LabelsUnmatchedNeverSeen != 1 || st.LabelsWaiting != 0 {
		t.Errorf("%d labels never seen, %d waiting: want the expired label counted", st.LabelsUnmatchedNeverSeen, st.LabelsWaiting)
	}
}

// A generation that ends midway through a restore (a rebalance, as when
// replicas start together) leaves its partitions not restored: /readyz
// says 503 naming them, also between generations, and the next generation
// that keeps them restores them, but not those restored already.
func TestServeRestoresPartitionsAcrossGenerations(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	var mu sync.Mutex
	var restored []string
	started := make(chan int, 8)
	restore := func(ctx context.Context, p int, _ time.Time, _ int64) (ingest.Source, error) {
		mu.Lock()
		restored = append(restored, fmt.Sprint(p))
		mu.Unlock()
		started <- p
		if p == 0 {
			return gateSource{open: closedChan()}, nil // nothing to restore
		}
		return blockingSource{}, nil // until the generation ends
	}
	svc, err := NewService(Config{Model: m, Source: blockingSource{}, Output: discardSink{}, DeadLetters: sink.NewRejects(io.Discard),
		Labels: &LateLabels{Source: noLabels{}, Topic: "labels", Restore: restore}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	readyz := func() (int, string) {
		rec := httptest.NewRecorder()
		svc.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if code, _ := readyz(); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the service is not ready")
		}
	}
	j := svc.join
	a1 := ingest.Assignment{Generation: 1, Records: map[int]int64{0: 10, 1: 10}, Labels: map[int]int64{0: 0, 1: 0}}
	gen1, endGen1 := context.WithCancel(ctx)
	assigned := make(chan error, 1)
	go func() { assigned <- j.assign(gen1, a1) }()
	<-started
	if p := <-started; p != 1 {
		t.Fatalf("restore of partition %d, want 1", p)
	}
	if code, body := readyz(); code != 503 || !strings.Contains(body, "[1]") {
		t.Errorf("readyz while partition 1 is restored: %d %q, want 503 naming it", code, body)
	}
	endGen1()
	if err := <-assigned; err == nil {
		t.Fatal("an assignment whose generation ended midway through the restore returned no error")
	}
	j.revoke(ctx, a1)
	if code, body := readyz(); code != 503 || !strings.Contains(body, "[1]") {
		t.Errorf("readyz between generations, partition 1 not restored: %d %q, want 503 naming it", code, body)
	}
	// Generation 2 keeps both partitions: partition 1 is restored now,
	// partition 0 (restored already) is kept as it is.
	restoreOne := func(ctx context.Context, p int, from time.Time, end int64) (ingest.Source, error) {
		mu.Lock()
		restored = append(restored, fmt.Sprint(p))
		mu.Unlock()
		return gateSource{open: closedChan()}, nil
	}
	j.cfg.Restore = restoreOne
	a2 := ingest.Assignment{Generation: 2, Records: map[int]int64{0: 12, 1: 12}, Labels: map[int]int64{0: 0, 1: 0}}
	if err := j.assign(ctx, a2); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := strings.Join(restored, " ")
	mu.Unlock()
	if got != "0 1 1" {
		t.Errorf("partitions restored %q, want %q: partition 1 again in the generation that kept it unrestored", got, "0 1 1")
	}
	if code, body := readyz(); code != 200 {
		t.Errorf("readyz once every partition is restored: %d %q", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// closedChan returns a closed channel.
func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// commitsSource is a LabelSource of a test that hands labels to the join
// itself and keeps the last commit.
type commitsSource struct {
	noLabels
	mu               sync.Mutex
	offsets, handled map[int]int64
}

func (c *commitsSource) CommitLabelsHandled(_ context.Context, _ int32, offsets, handled map[int]int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offsets, c.handled = offsets, handled
	return nil
}

// deadLetters counts the dead letters written, by source and row.
type deadLetters struct {
	mu      sync.Mutex
	written map[string]int
}

func (d *deadLetters) WriteRejects(_ context.Context, rejects []schemas.RowError) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range rejects {
		d.written[fmt.Sprintf("%s@%d", r.Source, r.Row)]++
	}
	return nil
}
func (*deadLetters) Close(context.Context) error { return nil }

// A message of the labels topic that is not a label is dead-lettered once:
// the commit records the offset below which every label was handled, and
// the partition's next owner (in another generation, or another process:
// the mark comes with its assignment) does not dead-letter again those it
// reads again because a label before them waits for its record. And what
// it reads again is bounded: a label waiting further behind than
// RereadLimit is given up (unmatched, evicted), and the offset committed
// moves past it.
func TestJoinDeadLettersLabelsOnce(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	newJoin := func(src LabelSource, dead sink.DeadLetters) *labelJoin {
		svc, err := NewService(Config{Model: m, Source: blockingSource{}, Output: discardSink{}, DeadLetters: dead,
			Labels: &LateLabels{Source: src, Topic: "labels", RereadLimit: 50}})
		if err != nil {
			t.Fatal(err)
		}
		return svc.join
	}
	// Offset 0 labels id 999, never produced: it waits, and the committed
	// offset with it. Offsets 1..12 are not labels, 13..19 label other
	// ids never produced either.
	batch := func(gen int32, to int64) ingest.LabelBatch {
		b := ingest.LabelBatch{Topic: "labels", Generation: gen}
		for off := int64(0); off < to; off++ {
			switch {
			case off >= 1 && off <= 12:
				b.Rejects = append(b.Rejects, schemas.RowError{Source: "labels/0", Row: off, Reason: "not a label"})
			default:
				b.Labels = append(b.Labels, ingest.Label{Partition: 0, Offset: off, ID: 999 + off, Value: 1})
			}
		}
		return b
	}
	ctx := context.Background()
	dead := &deadLetters{written: map[string]int{}}
	src := &commitsSource{}
	committed, handled := int64(-1), int64(0)
	for gen := int32(1); gen <= 4; gen++ {
		// Every generation, a new replica (a new join) takes the partition
		// from the offsets committed, and reads the labels again.
		j := newJoin(src, dead)
		labels, marks := map[int]int64{0: committed}, map[int]int64{}
		if handled > committed {
			marks[0] = handled
		}
		a := ingest.Assignment{Generation: gen, Records: map[int]int64{0: -1}, Labels: labels, LabelsHandled: marks}
		if err := j.assign(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := j.take(ctx, batch(gen, 20)); err != nil {
			t.Fatal(err)
		}
		j.revoke(ctx, a)
		committed, handled = src.offsets[0], src.handled[0]
		if committed != 0 || handled != 20 {
			t.Fatalf("generation %d committed offset %d, handled below %d; want 0 (a label waits) and 20", gen, committed, handled)
		}
	}
	if len(dead.written) != 12 {
		t.Errorf("%d messages dead-lettered, want 12", len(dead.written))
	}
	for msg, n := range dead.written {
		if n != 1 {
			t.Errorf("%s dead-lettered %d times, want once", msg, n)
		}
	}
	// 50 labels later, the oldest waiting are given up.
	j := newJoin(src, dead)
	a := ingest.Assignment{Generation: 5, Records: map[int]int64{0: -1}, Labels: map[int]int64{0: 0}, LabelsHandled: map[int]int64{0: 20}}
	if err := j.assign(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := j.take(ctx, batch(5, 65)); err != nil {
		t.Fatal(err)
	}
	if err := j.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if src.offsets[0] != 15 || src.handled[0] != 65 {
		t.Errorf("committed offset %d, handled below %d; want 15 (65 less the limit, 50) and 65", src.offsets[0], src.handled[0])
	}
	if st := j.s.Stats(); st.LabelsUnmatchedEvicted != 3 || st.LabelsWaiting != 50 {
		t.Errorf("%d labels given up, %d waiting; want the 3 below offset 15 (0, 13, 14), 50", st.LabelsUnmatchedEvicted, st.LabelsWaiting)
	}
	if len(dead.written) != 12 {
		t.Errorf("%d messages dead-lettered, want 12", len(dead.written))
	}
}
