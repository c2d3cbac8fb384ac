package serve

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/metrics"
	"github.com/mvml/mvml/sink"
)

// Stats are a Service's counters since it started; every number is
// defined, with its name and help in /metrics, in serveMetricDefs. They
// are grouped by concern in embedded structs, whose fields read (and
// marshal to JSON) as Stats' own.
type Stats struct {
	BatchStats
	RefitStats
	// Partitions are the statistics of the source's partitions, when it
	// has them (ingest.KafkaSource); Writers those of the output and
	// dead-letter writers that have them (the Kafka sinks).
	Partitions []ingest.PartitionStats `json:"partitions,omitempty"`
	Writers    []sink.KafkaWriterStats `json:"writers,omitempty"`
	LabelStats
	JoinStats
	PublishStats
	// Quality is the prequential quality of the model versions served, by
	// version, the one that last had a label joined first.
	Quality []VersionQuality `json:"quality,omitempty"`
	// Tuned are the values the last tuned refit chose (RefitPolicy.Tune),
	// by hyper-parameter.
	Tuned map[string]float64 `json:"tuned,omitempty"`

	ModelVersion string `json:"model_version"`
	Running      bool   `json:"running"`
}

// BatchStats count the records and batches on their way from the source
// to the sink. A row is counted as scored or dead-lettered once its batch
// is acknowledged (its scores and dead letters durable, its offsets
// committed); until then it is not committed, so In == Scored +
// DeadLettered + NotCommitted, also after a failure.
type BatchStats struct {
	In           int64 `json:"in"`
	Scored       int64 `json:"scored"`
	DeadLettered int64 `json:"dead_lettered"`
	// NotCommitted counts the rows taken but not acknowledged: the batch
	// in hand and those waiting for their output to commit, or, after a
	// failure, those that will be delivered again.
	NotCommitted int64 `json:"not_committed"`
	Batches      int64 `json:"batches"`
	// Pending counts the batches written, or being written, and not yet
	// acknowledged: waiting for their writes to end
	// (Config.WritesInFlight), their output to commit, or their
	// statistics to be published.
	Pending int64 `json:"pending"`
	// ScoreSeconds is the time scoring each batch took, Latency the time
	// from each scored record's timestamp (a Kafka record's) to its score
	// being durable in the output.
	ScoreSeconds Histogram `json:"score_seconds"`
	Latency      Histogram `json:"latency"`
}

// RefitStats count the labelled rows the Service learns from, its own
// refits and the models it follows.
type RefitStats struct {
	Labelled int64 `json:"labelled"`
	// LabelsRejected counts the labels a refit cannot learn from (not a
	// class of the model, not finite); their records are scored all the
	// same.
	LabelsRejected int64 `json:"labels_rejected"`
	Refits         int64 `json:"refits"`
	RefitFailures  int64 `json:"refit_failures"`
	// RefitOutcomes counts the refits that ended by outcome (refitServed,
	// refitFailed, refitCancelled, refitSuperseded).
	RefitOutcomes map[string]int64 `json:"refit_outcomes"`
	// Reloads counts the models FollowModels put in service,
	// ReloadFailures those made current that it could not serve, or that
	// the store refused as partial or damaged.
	Reloads        int64 `json:"reloads"`
	ReloadFailures int64 `json:"reload_failures"`
	// Accumulated is the (decayed) number of labelled rows in the refit
	// statistics.
	Accumulated float64 `json:"accumulated"`
	// LastRefitSeconds is how long the last successful refit took.
	LastRefitSeconds float64 `json:"last_refit_seconds"`
}

// LabelStats count the labels that arrive apart from their records
// (Config.Labels). LabelsIn counts the messages of the labels topic
// taken, those that did not decode (LabelsDeadLettered) included.
type LabelStats struct {
	LabelsIn           int64 `json:"labels_in"`
	LabelsDeadLettered int64 `json:"labels_dead_lettered"`
	// LabelsJoined counts the labels joined with the record they label;
	// the Unmatched* counters the labels used up without one, by reason
	// (see the constants unmatched*): a label is one or the other, unless
	// it says no label is known (LabelsNull) or a replica that owned its
	// partition before published it already (LabelsSkipped).
	LabelsJoined             int64 `json:"labels_joined"`
	LabelsUnmatchedExpired   int64 `json:"labels_unmatched_expired"`
	LabelsUnmatchedEvicted   int64 `json:"labels_unmatched_evicted"`
	LabelsUnmatchedNeverSeen int64 `json:"labels_unmatched_never_seen"`
	LabelsUnmatchedDuplicate int64 `json:"labels_unmatched_duplicate"`
	LabelsNull               int64 `json:"labels_null"`
	LabelsSkipped            int64 `json:"labels_skipped"`
}

// JoinStats describe the join store of late labels and the restore of
// the partitions a replica takes over.
type JoinStats struct {
	// LabelsWaiting are the labels waiting for their record, JoinRecords
	// the scored records waiting for their label, JoinBytes what the join
	// store holds (within LateLabels.CacheBytes), JoinEvicted the records
	// it pushed out unjoined.
	LabelsWaiting int64 `json:"labels_waiting"`
	JoinRecords   int64 `json:"join_records"`
	JoinBytes     int64 `json:"join_bytes"`
	JoinEvicted   int64 `json:"join_evicted"`
	// Restoring is 1 while newly owned partitions are restored, 0
	// otherwise; RecordsRestored counts the records scored again for it.
	Restoring       int64 `json:"restoring"`
	RecordsRestored int64 `json:"records_restored"`
}

// PublishStats count the statistics published for the refitter:
// StatsDeltas and StatsRows the statistics deltas published to the stats
// topic and their labelled rows; StatsUnpublished is the rows gathered
// for the next one.
type PublishStats struct {
	StatsDeltas      int64 `json:"stats_deltas"`
	StatsRows        int64 `json:"stats_rows"`
	StatsUnpublished int64 `json:"stats_unpublished"`
}

// The outcomes of a refit, the label values of mvml_refit_outcomes_total.
const (
	// refitServed: its model was put in service.
	refitServed = "served"
	// refitFailed: the fit or OnRefit failed; the old model stays.
	refitFailed = "failed"
	// refitCancelled: the service stopped, or a swapped-in model replaced
	// the one it refitted, before it ended.
	refitCancelled = "cancelled"
	// refitSuperseded: it ended after a swapped-in model had replaced the
	// one it refitted, so its model was dropped.
	refitSuperseded = "superseded"
	// refitRejected: the gate rejected the tuned refit (RefitPolicy.Tune);
	// the old model stays, the refit went to OnGated as a candidate.
	refitRejected = "rejected"
)

// Histogram is a distribution of observations (metrics.Histogram).
type Histogram = metrics.Histogram

// Buckets of the histograms, in seconds: a batch is scored in milliseconds
// to a second or so; a record's latency runs from milliseconds up to the
// minutes of a backlog.
var (
	scoreSecondsBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
	latencyBuckets      = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
)

// metric names one number of a Service.
type metric int

// The numbers of a Service, in the order /metrics lists them.
const (
	metricIn metric = iota
	metricScored
	metricDeadLettered
	metricLabelled
	metricLabelsRejected
	metricBatches
	metricRefits
	metricRefitFailures
	metricRefitOutcomes
	metricReloads
	metricReloadFailures
	metricNotCommitted
	metricPending
	metricAccumulated
	metricLastRefitSeconds
	metricScoreSeconds
	metricLatency
	metricConsumerLag
	metricFetchedMessages
	metricFetchedBytes
	metricFetchErrors
	metricWrittenMessages
	metricWrittenBytes
	metricWriteErrors
	metricWriteRetries
	metricModelInfo
	metricLabelsIn
	metricLabelsDeadLettered
	metricLabelsJoined
	metricUnmatchedExpired
	metricUnmatchedEvicted
	metricUnmatchedNeverSeen
	metricUnmatchedDuplicate
	metricLabelsNull
	metricLabelsSkipped
	metricLabelsWaiting
	metricJoinRecords
	metricJoinBytes
	metricJoinEvicted
	metricRestoring
	metricRecordsRestored
	metricStatsDeltas
	metricStatsRows
	metricStatsUnpublished
	metricQualityAccuracy
	metricQualityNMSE
	metricQualityLabels
	metricRefitTuned
	numMetrics
)

// MetricSample is one value of a metric that has labels, as /metrics
// shows it: name{label="value",…} value.
type MetricSample struct {
	// Labels are the label names and values, in pairs.
	Labels []string
	Value  float64
}

// serveMetricDefs defines every number of a Service once: its Prometheus
// name, kind (type and labels) and help, and where Stats holds it.
// field returns a pointer to the field (an *int64 or *float64 counted by
// serveMetrics, a *map[string]int64 counted by its one label, a
// *Histogram) or, for a number Stats holds otherwise, its samples
// ([]metrics.Sample). Stats and /metrics are both read from it: a row added here
// is in both.
var serveMetricDefs = [numMetrics]struct {
	name  string
	kind  metrics.Kind
	help  string
	field func(*Stats) any
}{
	metricIn:               {"mvml_records_in_total", metrics.Counter, "Records taken from the source.", func(s *Stats) any { return &s.In }},
	metricScored:           {"mvml_records_scored_total", metrics.Counter, "Records scored, written to the output and committed.", func(s *Stats) any { return &s.Scored }},
	metricDeadLettered:     {"mvml_records_dead_lettered_total", metrics.Counter, "Records sent to the dead-letter destination and committed.", func(s *Stats) any { return &s.DeadLettered }},
	metricLabelled:         {"mvml_records_labelled_total", metrics.Counter, "Labelled records added to the refit statistics.", func(s *Stats) any { return &s.Labelled }},
	metricLabelsRejected:   {"mvml_labels_rejected_total", metrics.Counter, "Labels a refit cannot learn from (not a class of the model, not finite); their records were scored.", func(s *Stats) any { return &s.LabelsRejected }},
	metricBatches:          {"mvml_batches_total", metrics.Counter, "Batches written and acknowledged.", func(s *Stats) any { return &s.Batches }},
	metricRefits:           {"mvml_refits_total", metrics.Counter, "Refitted models put in service.", func(s *Stats) any { return &s.Refits }},
	metricRefitFailures:    {"mvml_refit_failures_total", metrics.Counter, "Refits that failed; the old model stayed in service.", func(s *Stats) any { return &s.RefitFailures }},
	metricRefitOutcomes:    {"mvml_refit_outcomes_total", metrics.CountersBy("outcome"), "Refits that ended, by outcome: served, failed (the old model stayed), cancelled (the service stopped, or a model put in service replaced the one refitted), superseded (ended after such a replacement; dropped), rejected (by the gate of a tuned refit: a candidate).", func(s *Stats) any { return &s.RefitOutcomes }},
	metricReloads:          {"mvml_model_reloads_total", metrics.Counter, "Models made current in the model store or file followed and put in service.", func(s *Stats) any { return &s.Reloads }},
	metricReloadFailures:   {"mvml_model_reload_failures_total", metrics.Counter, "Models made current that could not be served (partial, damaged, other views); the old model stayed in service.", func(s *Stats) any { return &s.ReloadFailures }},
	metricNotCommitted:     {"mvml_records_not_committed", metrics.Gauge, "Records taken and not yet acknowledged.", func(s *Stats) any { return &s.NotCommitted }},
	metricPending:          {"mvml_batches_pending", metrics.Gauge, "Batches written, or being written, and not yet acknowledged: waiting for their writes to end (--writes-in-flight), their output to commit, or their statistics to be published.", func(s *Stats) any { return &s.Pending }},
	metricAccumulated:      {"mvml_refit_rows", metrics.Gauge, "Labelled rows (decayed) in the statistics of the next refit.", func(s *Stats) any { return &s.Accumulated }},
	metricLastRefitSeconds: {"mvml_last_refit_seconds", metrics.Gauge, "Duration of the last refit put in service.", func(s *Stats) any { return &s.LastRefitSeconds }},
	metricScoreSeconds:     {"mvml_batch_score_seconds", metrics.HistogramOf(scoreSecondsBuckets), "Time to score one batch (its records decoded; writing not included).", func(s *Stats) any { return &s.ScoreSeconds }},
	metricLatency:          {"mvml_end_to_end_latency_seconds", metrics.HistogramOf(latencyBuckets), "Time from a record's Kafka timestamp to its score being durable: acknowledged by the broker, or its Parquet file committed.", func(s *Stats) any { return &s.Latency }},
	metricConsumerLag: {"mvml_kafka_consumer_lag", metrics.GaugesBy("topic", "partition"), "Messages of a partition the service owns after the last one it took.",
		func(s *Stats) any {
			return partitionSamples(s.Partitions, true, func(p ingest.PartitionStats) int64 { return p.Lag })
		}},
	metricFetchedMessages: {"mvml_kafka_fetched_messages_total", metrics.CountersBy("topic", "partition"), "Messages fetched from a partition.",
		func(s *Stats) any {
			return partitionSamples(s.Partitions, false, func(p ingest.PartitionStats) int64 { return p.Messages })
		}},
	metricFetchedBytes: {"mvml_kafka_fetched_bytes_total", metrics.CountersBy("topic", "partition"), "Bytes of the keys and values of the messages fetched from a partition.",
		func(s *Stats) any {
			return partitionSamples(s.Partitions, false, func(p ingest.PartitionStats) int64 { return p.Bytes })
		}},
	metricFetchErrors: {"mvml_kafka_fetch_errors_total", metrics.CountersBy("topic", "partition"), "Errors of the fetches and lag reads of a partition.",
		func(s *Stats) any {
			return partitionSamples(s.Partitions, false, func(p ingest.PartitionStats) int64 { return p.Errors })
		}},
	metricWrittenMessages: {"mvml_kafka_written_messages_total", metrics.CountersBy("topic"), "Messages sent to a topic of scores or dead letters (a message sent again counts again).",
		func(s *Stats) any {
			return writerSamples(s.Writers, func(w sink.KafkaWriterStats) int64 { return w.Messages })
		}},
	metricWrittenBytes: {"mvml_kafka_written_bytes_total", metrics.CountersBy("topic"), "Bytes of the messages sent to a topic of scores or dead letters.",
		func(s *Stats) any {
			return writerSamples(s.Writers, func(w sink.KafkaWriterStats) int64 { return w.Bytes })
		}},
	metricWriteErrors: {"mvml_kafka_write_errors_total", metrics.CountersBy("topic"), "Produce requests to a topic of scores or dead letters that failed.",
		func(s *Stats) any {
			return writerSamples(s.Writers, func(w sink.KafkaWriterStats) int64 { return w.Errors })
		}},
	metricWriteRetries: {"mvml_kafka_write_retries_total", metrics.CountersBy("topic"), "Writes to a topic of scores or dead letters tried again after a transient failure.",
		func(s *Stats) any {
			return writerSamples(s.Writers, func(w sink.KafkaWriterStats) int64 { return w.Retries })
		}},
	metricModelInfo: {"mvml_model_info", metrics.GaugesBy("version"), "The model in service.",
		func(s *Stats) any { return []metrics.Sample{{Labels: []string{s.ModelVersion}, Value: 1}} }},

	metricLabelsIn:           {"mvml_labels_in_total", metrics.Counter, "Messages taken from the labels topic.", func(s *Stats) any { return &s.LabelsIn }},
	metricLabelsDeadLettered: {"mvml_labels_dead_lettered_total", metrics.Counter, "Messages of the labels topic that were not a label, sent to the dead-letter destination.", func(s *Stats) any { return &s.LabelsDeadLettered }},
	metricLabelsJoined:       {"mvml_labels_joined_total", metrics.Counter, "Labels joined with the record they label.", func(s *Stats) any { return &s.LabelsJoined }},
	metricUnmatchedExpired: {"mvml_labels_unmatched_total", metrics.CountersBy("reason"),
		"Labels used up without their record, by reason: expired (the record was scored longer ago than the label window), evicted (pushed out of the join store), never_seen (no record of the id within the window), duplicate (the record was joined with an earlier label).",
		func(s *Stats) any { return metrics.LabelledInt{Label: "expired", Value: &s.LabelsUnmatchedExpired} }},
	metricUnmatchedEvicted: {"mvml_labels_unmatched_total", metrics.CountersBy("reason"), "", func(s *Stats) any { return metrics.LabelledInt{Label: "evicted", Value: &s.LabelsUnmatchedEvicted} }},
	metricUnmatchedNeverSeen: {"mvml_labels_unmatched_total", metrics.CountersBy("reason"), "", func(s *Stats) any {
		return metrics.LabelledInt{Label: "never_seen", Value: &s.LabelsUnmatchedNeverSeen}
	}},
	metricUnmatchedDuplicate: {"mvml_labels_unmatched_total", metrics.CountersBy("reason"), "", func(s *Stats) any { return metrics.LabelledInt{Label: "duplicate", Value: &s.LabelsUnmatchedDuplicate} }},
	metricLabelsNull:         {"mvml_labels_null_total", metrics.Counter, "Label messages saying that no label is known (null).", func(s *Stats) any { return &s.LabelsNull }},
	metricLabelsSkipped:      {"mvml_labels_skipped_total", metrics.Counter, "Labels skipped because a replica that owned their partition before published them in its statistics.", func(s *Stats) any { return &s.LabelsSkipped }},
	metricLabelsWaiting:      {"mvml_labels_waiting", metrics.Gauge, "Labels waiting in the join store for their record.", func(s *Stats) any { return &s.LabelsWaiting }},
	metricJoinRecords:        {"mvml_join_records", metrics.Gauge, "Scored records waiting in the join store for their label.", func(s *Stats) any { return &s.JoinRecords }},
	metricJoinBytes:          {"mvml_join_bytes", metrics.Gauge, "Bytes held by the join store (bounded by --label-cache-bytes).", func(s *Stats) any { return &s.JoinBytes }},
	metricJoinEvicted:        {"mvml_join_evicted_total", metrics.Counter, "Scored records pushed out of the join store before their label came.", func(s *Stats) any { return &s.JoinEvicted }},
	metricRestoring:          {"mvml_restoring", metrics.Gauge, "1 while the records of newly owned partitions are scored again for the join, 0 otherwise.", func(s *Stats) any { return &s.Restoring }},
	metricRecordsRestored:    {"mvml_records_restored_total", metrics.Counter, "Records of newly owned partitions scored again for the join.", func(s *Stats) any { return &s.RecordsRestored }},
	metricStatsDeltas:        {"mvml_stats_deltas_total", metrics.Counter, "Statistics deltas published to the stats topic.", func(s *Stats) any { return &s.StatsDeltas }},
	metricStatsRows:          {"mvml_stats_rows_total", metrics.Counter, "Labelled rows in the statistics deltas published.", func(s *Stats) any { return &s.StatsRows }},
	metricStatsUnpublished:   {"mvml_stats_unpublished_rows", metrics.Gauge, "Labelled rows gathered for the next statistics delta.", func(s *Stats) any { return &s.StatsUnpublished }},
	metricQualityAccuracy: {"mvml_prequential_accuracy", metrics.GaugesBy("version"),
		"Share of the predictions a model version served that its joined labels confirmed, over its last labels (classification).",
		func(s *Stats) any {
			return qualitySamples(s, func(q VersionQuality) *float64 { return q.Accuracy })
		}},
	metricQualityNMSE: {"mvml_prequential_nmse", metrics.GaugesBy("version"),
		"Normalised squared error of the predictions a model version served against their joined labels, over its last labels (regression).",
		func(s *Stats) any { return qualitySamples(s, func(q VersionQuality) *float64 { return q.NMSE }) }},
	metricQualityLabels: {"mvml_prequential_labels", metrics.GaugesBy("version"), "Labels the prequential quality of a model version is measured on (its window).",
		func(s *Stats) any {
			return qualitySamples(s, func(q VersionQuality) *float64 { w := float64(q.Window); return &w })
		}},
	metricRefitTuned: {"mvml_refit_tuned", metrics.GaugesBy("param"), "The value of every hyper-parameter the last tuned refit chose (--tune).",
		func(s *Stats) any {
			var out []metrics.Sample
			for _, k := range model.TuneKeys {
				if v, ok := s.Tuned[k]; ok {
					out = append(out, metrics.Sample{Labels: []string{k}, Value: v})
				}
			}
			return out
		}},
}

// qualitySamples are the samples of one measure of the prequential
// quality, labelled by version, for the versions that have it.
func qualitySamples(s *Stats, measure func(VersionQuality) *float64) []metrics.Sample {
	var out []metrics.Sample
	for _, q := range s.Quality {
		if v := measure(q); v != nil {
			out = append(out, metrics.Sample{Labels: []string{q.Version}, Value: *v})
		}
	}
	return out
}

// partitionSamples are the samples of a number of the source's
// partitions, of those the service owns only when owned is set.
func partitionSamples(parts []ingest.PartitionStats, owned bool, value func(ingest.PartitionStats) int64) []metrics.Sample {
	var out []metrics.Sample
	for _, p := range parts {
		if !owned || p.Owned {
			out = append(out, metrics.Sample{Labels: []string{p.Topic, strconv.Itoa(p.Partition)}, Value: float64(value(p))})
		}
	}
	return out
}

// writerSamples are the samples of a number of the Kafka writers, by
// topic.
func writerSamples(writers []sink.KafkaWriterStats, value func(sink.KafkaWriterStats) int64) []metrics.Sample {
	out := make([]metrics.Sample, len(writers))
	for i, w := range writers {
		out[i] = metrics.Sample{Labels: []string{w.Topic}, Value: float64(value(w))}
	}
	return out
}

// serveMetrics holds the values of the numbers of a Service, for
// concurrent use; a float64 number keeps its bits.
type serveMetrics struct {
	values [numMetrics]atomic.Int64
	hists  [numMetrics]*histogramValues
	mu     sync.Mutex
	counts [numMetrics]map[string]int64 // by label value
}

func newServeMetrics() *serveMetrics {
	v := &serveMetrics{}
	for m, def := range serveMetricDefs {
		if def.kind.Type == "histogram" {
			v.hists[m] = newHistogramValues(def.kind.Buckets)
		}
	}
	return v
}

func (v *serveMetrics) add(m metric, n int64)        { v.values[m].Add(n) }
func (v *serveMetrics) set(m metric, n int64)        { v.values[m].Store(n) }
func (v *serveMetrics) setFloat(m metric, x float64) { v.values[m].Store(int64(math.Float64bits(x))) }
func (v *serveMetrics) observe(m metric, x float64)  { v.hists[m].observe(x) }

// addTo adds n to the count of label value of m.
func (v *serveMetrics) addTo(m metric, label string, n int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.counts[m] == nil {
		v.counts[m] = map[string]int64{}
	}
	v.counts[m][label] += n
}

// countsOf returns the counts of m by label value, an empty map (not nil,
// which JSON would show as null) when there are none.
func (v *serveMetrics) countsOf(m metric) map[string]int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.counts[m] == nil {
		return map[string]int64{}
	}
	return maps.Clone(v.counts[m])
}

// histogramValues counts observations into buckets, for concurrent use.
type histogramValues struct {
	bounds []float64
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    atomic.Uint64   // float64 bits
}

func newHistogramValues(bounds []float64) *histogramValues {
	return &histogramValues{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

func (h *histogramValues) observe(x float64) {
	i, _ := slices.BinarySearch(h.bounds, x)
	h.counts[i].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+x)) {
			return
		}
	}
}

func (h *histogramValues) snapshot() Histogram {
	out := Histogram{Bounds: h.bounds, Counts: make([]uint64, len(h.bounds)), Sum: math.Float64frombits(h.sum.Load())}
	for i := range h.counts {
		out.Count += h.counts[i].Load()
		if i < len(h.bounds) {
			out.Counts[i] = out.Count
		}
	}
	return out
}

// partitionStatser is implemented by sources that read partitions, such
// as ingest.KafkaSource.
type partitionStatser interface {
	PartitionStats() []ingest.PartitionStats
}

// writerStatser is implemented by the Kafka sinks.
type writerStatser interface {
	Stats() sink.KafkaWriterStats
}

// Stats returns the counters. Safe for concurrent use.
func (s *Service) Stats() Stats {
	st := Stats{ModelVersion: s.Model().Version, Running: s.running()}
	if src, ok := s.cfg.Source.(partitionStatser); ok {
		st.Partitions = src.PartitionStats()
	}
	for _, dst := range []any{s.cfg.Output, s.cfg.DeadLetters} {
		if w, ok := dst.(writerStatser); ok {
			st.Writers = append(st.Writers, w.Stats())
		}
	}
	st.Quality = s.quality()
	st.Tuned = s.tunedValues()
	for m, def := range serveMetricDefs {
		switch field := def.field(&st).(type) {
		case *int64:
			*field = s.metrics.values[m].Load()
			if metric(m) == metricReloadFailures {
				*field += s.refused()
			}
		case *float64:
			*field = math.Float64frombits(uint64(s.metrics.values[m].Load()))
		case *map[string]int64:
			*field = s.metrics.countsOf(metric(m))
		case *Histogram:
			*field = s.metrics.hists[m].snapshot()
		case metrics.LabelledInt:
			*field.Value = s.metrics.values[m].Load()
		}
	}
	return st
}

// newServiceCollector is the collector of the numbers of s as
// serveMetricDefs defines them.
func newServiceCollector(s *Service) *metrics.Collector[Stats] {
	defs := make([]metrics.Def, len(serveMetricDefs))
	for m, d := range serveMetricDefs {
		defs[m] = metrics.Def{Name: d.name, Kind: d.kind, Help: d.help}
	}
	return metrics.NewCollector(defs, s.Stats, func(st *Stats, m int) any { return serveMetricDefs[m].field(st) })
}

// readiness is implemented by sources that know whether they are
// consuming, such as ingest.KafkaSource: Ready returns nil when they are,
// or why not.
type readiness interface {
	Ready() error
}

// ServeHTTP answers /healthz (liveness: 200 while Run is serving, 503
// otherwise), /readyz (200 while Run is serving, every partition owned is
// restored for the join of late labels, whatever generations passed, and
// its source, when it
// can tell, is consuming; 503 with the reason otherwise) and /metrics (the
// numbers of serveMetricDefs, the Go runtime's and the process's, in
// Prometheus' formats).
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz":
		if !s.running() {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	case "/readyz":
		if !s.running() {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		if s.join != nil {
			if ps := s.join.notRestored(); len(ps) > 0 || s.join.restoring.Load() > 0 {
				http.Error(w, fmt.Sprintf("not consuming: restoring the records of newly owned partitions for the join of late labels (not restored yet: %v)", ps),
					http.StatusServiceUnavailable)
				return
			}
		}
		if src, ok := s.cfg.Source.(readiness); ok {
			if err := src.Ready(); err != nil {
				http.Error(w, "not consuming: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	case "/metrics":
		s.metricsHandler.ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}
