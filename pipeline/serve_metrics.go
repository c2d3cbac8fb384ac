package pipeline

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sync/atomic"
)

// ServeStats are a Service's counters since it started; every number is
// defined, with its name and help in /metrics, in serveMetricDefs. A row is counted
// as scored or dead-lettered once its batch is acknowledged (its scores
// and dead letters durable, its offsets committed); until then it is not
// committed, so In == Scored + DeadLettered + NotCommitted, also after a
// failure.
type ServeStats struct {
	In           int64 `json:"in"`
	Scored       int64 `json:"scored"`
	DeadLettered int64 `json:"dead_lettered"`
	// NotCommitted counts the rows taken but not acknowledged: the batch
	// in hand and those waiting for their output to commit, or, after a
	// failure, those that will be delivered again.
	NotCommitted int64 `json:"not_committed"`
	Labelled     int64 `json:"labelled"`
	// LabelsRejected counts the labels a refit cannot learn from (not a
	// class of the model, not finite); their records are scored all the
	// same.
	LabelsRejected int64 `json:"labels_rejected"`
	Batches        int64 `json:"batches"`
	Refits         int64 `json:"refits"`
	RefitFailures  int64 `json:"refit_failures"`
	// Reloads counts the models FollowModels put in service,
	// ReloadFailures those made current that it could not serve, or that
	// the store refused as partial or damaged.
	Reloads        int64 `json:"reloads"`
	ReloadFailures int64 `json:"reload_failures"`
	// Pending counts the batches written but not yet acknowledged, waiting
	// for their output to commit.
	Pending int64 `json:"pending"`
	// Accumulated is the (decayed) number of labelled rows in the refit
	// statistics.
	Accumulated float64 `json:"accumulated"`
	// LastRefitSeconds is how long the last successful refit took.
	LastRefitSeconds float64 `json:"last_refit_seconds"`

	// The labels that arrive apart from their records (ServeConfig.Labels).
	// LabelsIn counts the messages of the labels topic taken, those that
	// did not decode (LabelsDeadLettered) included.
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
	// StatsDeltas and StatsRows count the statistics deltas published to
	// the stats topic and their labelled rows; StatsUnpublished is the
	// rows gathered for the next one.
	StatsDeltas      int64 `json:"stats_deltas"`
	StatsRows        int64 `json:"stats_rows"`
	StatsUnpublished int64 `json:"stats_unpublished"`
	// Quality is the prequential quality of the model versions served, by
	// version, the one that last had a label joined first.
	Quality []VersionQuality `json:"quality,omitempty"`

	ModelVersion string `json:"model_version"`
	Running      bool   `json:"running"`
}

// metricKind is the Prometheus type of a metric.
type metricKind string

const (
	counter metricKind = "counter"
	gauge   metricKind = "gauge"
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
	metricReloads
	metricReloadFailures
	metricNotCommitted
	metricPending
	metricAccumulated
	metricLastRefitSeconds
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
// name, type and help, and its field in ServeStats (an *int64 or a
// *float64). A metric with labels has a row per field when its label
// values are fixed (a labelledInt: mvml_labels_unmatched_total by reason;
// the rows of one name follow each other, the first has the help), or
// one row whose field gives its samples ([]MetricSample, read from
// ServeStats). Stats and /metrics are both read from it.
var serveMetricDefs = [numMetrics]struct {
	name  string
	kind  metricKind
	help  string
	field func(*ServeStats) any
}{
	metricIn:               {"mvml_records_in_total", counter, "Records taken from the source.", func(s *ServeStats) any { return &s.In }},
	metricScored:           {"mvml_records_scored_total", counter, "Records scored, written to the output and committed.", func(s *ServeStats) any { return &s.Scored }},
	metricDeadLettered:     {"mvml_records_dead_lettered_total", counter, "Records sent to the dead-letter destination and committed.", func(s *ServeStats) any { return &s.DeadLettered }},
	metricLabelled:         {"mvml_records_labelled_total", counter, "Labelled records added to the refit statistics.", func(s *ServeStats) any { return &s.Labelled }},
	metricLabelsRejected:   {"mvml_labels_rejected_total", counter, "Labels a refit cannot learn from (not a class of the model, not finite); their records were scored.", func(s *ServeStats) any { return &s.LabelsRejected }},
	metricBatches:          {"mvml_batches_total", counter, "Batches written and acknowledged.", func(s *ServeStats) any { return &s.Batches }},
	metricRefits:           {"mvml_refits_total", counter, "Refitted models put in service.", func(s *ServeStats) any { return &s.Refits }},
	metricRefitFailures:    {"mvml_refit_failures_total", counter, "Refits that failed; the old model stayed in service.", func(s *ServeStats) any { return &s.RefitFailures }},
	metricReloads:          {"mvml_model_reloads_total", counter, "Models made current in the model store or file followed and put in service.", func(s *ServeStats) any { return &s.Reloads }},
	metricReloadFailures:   {"mvml_model_reload_failures_total", counter, "Models made current that could not be served (partial, damaged, other views); the old model stayed in service.", func(s *ServeStats) any { return &s.ReloadFailures }},
	metricNotCommitted:     {"mvml_records_not_committed", gauge, "Records taken and not yet acknowledged.", func(s *ServeStats) any { return &s.NotCommitted }},
	metricPending:          {"mvml_batches_pending", gauge, "Batches written and waiting for their output to commit before they are acknowledged.", func(s *ServeStats) any { return &s.Pending }},
	metricAccumulated:      {"mvml_refit_rows", gauge, "Labelled rows (decayed) in the statistics of the next refit.", func(s *ServeStats) any { return &s.Accumulated }},
	metricLastRefitSeconds: {"mvml_last_refit_seconds", gauge, "Duration of the last refit put in service.", func(s *ServeStats) any { return &s.LastRefitSeconds }},

	metricLabelsIn:           {"mvml_labels_in_total", counter, "Messages taken from the labels topic.", func(s *ServeStats) any { return &s.LabelsIn }},
	metricLabelsDeadLettered: {"mvml_labels_dead_lettered_total", counter, "Messages of the labels topic that were not a label, sent to the dead-letter destination.", func(s *ServeStats) any { return &s.LabelsDeadLettered }},
	metricLabelsJoined:       {"mvml_labels_joined_total", counter, "Labels joined with the record they label.", func(s *ServeStats) any { return &s.LabelsJoined }},
	metricUnmatchedExpired: {"mvml_labels_unmatched_total", counter,
		"Labels used up without their record, by reason: expired (the record was scored longer ago than the label window), evicted (pushed out of the join store), never_seen (no record of the id within the window), duplicate (the record was joined with an earlier label).",
		func(s *ServeStats) any { return labelledInt{`reason="expired"`, &s.LabelsUnmatchedExpired} }},
	metricUnmatchedEvicted:   {"mvml_labels_unmatched_total", counter, "", func(s *ServeStats) any { return labelledInt{`reason="evicted"`, &s.LabelsUnmatchedEvicted} }},
	metricUnmatchedNeverSeen: {"mvml_labels_unmatched_total", counter, "", func(s *ServeStats) any { return labelledInt{`reason="never_seen"`, &s.LabelsUnmatchedNeverSeen} }},
	metricUnmatchedDuplicate: {"mvml_labels_unmatched_total", counter, "", func(s *ServeStats) any { return labelledInt{`reason="duplicate"`, &s.LabelsUnmatchedDuplicate} }},
	metricLabelsNull:         {"mvml_labels_null_total", counter, "Label messages saying that no label is known (null).", func(s *ServeStats) any { return &s.LabelsNull }},
	metricLabelsSkipped:      {"mvml_labels_skipped_total", counter, "Labels skipped because a replica that owned their partition before published them in its statistics.", func(s *ServeStats) any { return &s.LabelsSkipped }},
	metricLabelsWaiting:      {"mvml_labels_waiting", gauge, "Labels waiting in the join store for their record.", func(s *ServeStats) any { return &s.LabelsWaiting }},
	metricJoinRecords:        {"mvml_join_records", gauge, "Scored records waiting in the join store for their label.", func(s *ServeStats) any { return &s.JoinRecords }},
	metricJoinBytes:          {"mvml_join_bytes", gauge, "Bytes held by the join store (bounded by --label-cache-bytes).", func(s *ServeStats) any { return &s.JoinBytes }},
	metricJoinEvicted:        {"mvml_join_evicted_total", counter, "Scored records pushed out of the join store before their label came.", func(s *ServeStats) any { return &s.JoinEvicted }},
	metricRestoring:          {"mvml_restoring", gauge, "1 while the records of newly owned partitions are scored again for the join, 0 otherwise.", func(s *ServeStats) any { return &s.Restoring }},
	metricRecordsRestored:    {"mvml_records_restored_total", counter, "Records of newly owned partitions scored again for the join.", func(s *ServeStats) any { return &s.RecordsRestored }},
	metricStatsDeltas:        {"mvml_stats_deltas_total", counter, "Statistics deltas published to the stats topic.", func(s *ServeStats) any { return &s.StatsDeltas }},
	metricStatsRows:          {"mvml_stats_rows_total", counter, "Labelled rows in the statistics deltas published.", func(s *ServeStats) any { return &s.StatsRows }},
	metricStatsUnpublished:   {"mvml_stats_unpublished_rows", gauge, "Labelled rows gathered for the next statistics delta.", func(s *ServeStats) any { return &s.StatsUnpublished }},
	metricQualityAccuracy: {"mvml_prequential_accuracy", gauge,
		"Share of the predictions a model version served that its joined labels confirmed, over its last labels (classification).",
		func(s *ServeStats) any {
			return qualitySamples(s, func(q VersionQuality) *float64 { return q.Accuracy })
		}},
	metricQualityNMSE: {"mvml_prequential_nmse", gauge,
		"Normalised squared error of the predictions a model version served against their joined labels, over its last labels (regression).",
		func(s *ServeStats) any { return qualitySamples(s, func(q VersionQuality) *float64 { return q.NMSE }) }},
	metricQualityLabels: {"mvml_prequential_labels", gauge, "Labels the prequential quality of a model version is measured on (its window).",
		func(s *ServeStats) any {
			return qualitySamples(s, func(q VersionQuality) *float64 { w := float64(q.Window); return &w })
		}},
}

// labelledInt is the field of a row that holds one label value of a
// metric: Labels is it as /metrics writes it, e.g. `reason="expired"`.
type labelledInt struct {
	Labels string
	Value  *int64
}

// qualitySamples are the samples of one measure of the prequential
// quality, labelled by version, for the versions that have it.
func qualitySamples(s *ServeStats, measure func(VersionQuality) *float64) []MetricSample {
	var out []MetricSample
	for _, q := range s.Quality {
		if v := measure(q); v != nil {
			out = append(out, MetricSample{Labels: []string{"version", q.Version}, Value: *v})
		}
	}
	return out
}

// modelInfoHelp is the help of mvml_model_info, which carries the model
// version as a label rather than as a number.
const modelInfoHelp = "The model in service."

// serveMetrics holds the values of the numbers of a Service, for
// concurrent use; a float64 number keeps its bits.
type serveMetrics [numMetrics]atomic.Int64

func (v *serveMetrics) add(m metric, n int64)        { v[m].Add(n) }
func (v *serveMetrics) set(m metric, n int64)        { v[m].Store(n) }
func (v *serveMetrics) setFloat(m metric, x float64) { v[m].Store(int64(math.Float64bits(x))) }

// Stats returns the counters. Safe for concurrent use.
func (s *Service) Stats() ServeStats {
	st := ServeStats{ModelVersion: s.Model().Version, Running: s.running()}
	st.Quality = s.quality()
	for m, def := range serveMetricDefs {
		switch field := def.field(&st).(type) {
		case labelledInt:
			*field.Value = s.metrics[m].Load()
		case *int64:
			*field = s.metrics[m].Load()
			if metric(m) == metricReloadFailures {
				*field += s.refused()
			}
		case *float64:
			*field = math.Float64frombits(uint64(s.metrics[m].Load()))
		}
	}
	return st
}

// writeMetrics writes st in Prometheus' text format.
func writeMetrics(w io.Writer, st ServeStats) {
	for i, def := range serveMetricDefs {
		if i == 0 || serveMetricDefs[i-1].name != def.name {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", def.name, def.help, def.name, def.kind)
		}
		switch field := def.field(&st).(type) {
		case *int64:
			fmt.Fprintf(w, "%s %d\n", def.name, *field)
		case *float64:
			fmt.Fprintf(w, "%s %s\n", def.name, formatMetricValue(*field))
		case labelledInt:
			fmt.Fprintf(w, "%s{%s} %d\n", def.name, field.Labels, *field.Value)
		case []MetricSample:
			for _, sample := range field {
				fmt.Fprintf(w, "%s{", def.name)
				for j := 0; j+1 < len(sample.Labels); j += 2 {
					if j > 0 {
						fmt.Fprint(w, ",")
					}
					fmt.Fprintf(w, "%s=%q", sample.Labels[j], sample.Labels[j+1])
				}
				fmt.Fprintf(w, "} %s\n", formatMetricValue(sample.Value))
			}
		}
	}
	fmt.Fprintf(w, "# HELP mvml_model_info %s\n# TYPE mvml_model_info %s\nmvml_model_info{version=%q} 1\n", modelInfoHelp, gauge, st.ModelVersion)
}

// formatMetricValue writes x as Prometheus' text format does: NaN and
// ±Inf by those names.
func formatMetricValue(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "+Inf"
	case math.IsInf(x, -1):
		return "-Inf"
	}
	return fmt.Sprintf("%g", x)
}

// readiness is implemented by sources that know whether they are
// consuming, such as ingest.KafkaSource: Ready returns nil when they are,
// or why not.
type readiness interface {
	Ready() error
}

// ServeHTTP answers /healthz (liveness: 200 while Run is serving, 503
// otherwise), /readyz (200 while Run is serving, no newly owned partition
// is being restored for the join of late labels, and its source, when it
// can tell, is consuming; 503 with the reason otherwise) and /metrics (the
// counters in Prometheus' text format).
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := s.Stats()
	switch r.URL.Path {
	case "/healthz":
		if !st.Running {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	case "/readyz":
		if !st.Running {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		if s.join != nil && s.join.restoring.Load() > 0 {
			http.Error(w, "not consuming: restoring the records of newly owned partitions for the join of late labels", http.StatusServiceUnavailable)
			return
		}
		if src, ok := s.cfg.Source.(readiness); ok {
			if err := src.Ready(); err != nil {
				http.Error(w, "not consuming: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	case "/metrics":
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		writeMetrics(w, st)
	default:
		http.NotFound(w, r)
	}
}
