package refit

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"sync/atomic"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/metrics"
)

// Stats are a Role's numbers since it started; every number
// is defined, with its name and help in /metrics, in refitMetricDefs.
type Stats struct {
	// Active is 1 while the refitter is the active member of its group.
	Active int64 `json:"active"`
	// The deltas read from the stats topic, by what became of them.
	DeltasMerged  int64 `json:"deltas_merged"`
	DeltasDropped int64 `json:"deltas_dropped"`
	DeltasRefused int64 `json:"deltas_refused"`
	DeltasCorrupt int64 `json:"deltas_corrupt"`
	DeltasSkipped int64 `json:"deltas_skipped"`
	// RowsMerged counts the labelled rows of the deltas merged;
	// RowsPending those merged since the last refit.
	RowsMerged  int64 `json:"rows_merged"`
	RowsPending int64 `json:"rows_pending"`
	// The refits, by outcome.
	Published int64 `json:"published"`
	Failed    int64 `json:"failed"`
	Abandoned int64 `json:"abandoned"`
	// Rejected counts tuned refits the gate kept from being made current:
	// published as candidates.
	Rejected int64 `json:"rejected"`
	// Tuned are the values the last tuned refit chose (--tune).
	Tuned map[string]float64 `json:"tuned,omitempty"`
	// LastPublished is the Unix time of the last model published, 0
	// before the first; LastRefitSeconds how long its refit took.
	LastPublished    float64 `json:"last_published"`
	LastRefitSeconds float64 `json:"last_refit_seconds"`
	// StatsOffset is the next offset of the stats topic to be read.
	StatsOffset int64 `json:"stats_offset"`
	// Lineage and ModelVersion are those of the statistics refitted and
	// of the current model, while active.
	Lineage      string `json:"lineage"`
	ModelVersion string `json:"model_version"`
	Running      bool   `json:"running"`
}

// refitMetric names one number of a Role.
type refitMetric int

// The numbers of a Role, in the order /metrics lists them.
const (
	refitMetricActive refitMetric = iota
	refitMetricDeltasMerged
	refitMetricDeltasDropped
	refitMetricDeltasRefused
	refitMetricDeltasCorrupt
	refitMetricDeltasSkipped
	refitMetricRowsMerged
	refitMetricRowsPending
	refitMetricPublished
	refitMetricFailed
	refitMetricAbandoned
	refitMetricRejected
	refitMetricOutcomes
	refitMetricTuned
	refitMetricLastPublished
	refitMetricLastRefitSeconds
	refitMetricStatsOffset
	refitMetricModelInfo
	numRefitMetrics
)

// refitMetricDefs defines every number of a Role once, as
// package serve's serveMetricDefs does a Service's: its Prometheus name, kind and help,
// and its field in Stats (an *int64 or a *float64 counted by
// refitMetrics) or, for what Stats holds otherwise, its samples
// ([]metrics.Sample). Stats and /metrics are both read from it.
var refitMetricDefs = [numRefitMetrics]struct {
	name  string
	kind  metrics.Kind
	help  string
	field func(*Stats) any
}{
	refitMetricActive:        {"mvml_refit_active", metrics.Gauge, "1 while this refitter is the active member of its group, 0 while it stands by.", func(s *Stats) any { return &s.Active }},
	refitMetricDeltasMerged:  {"mvml_refit_deltas_merged_total", metrics.Counter, "Statistics deltas merged.", func(s *Stats) any { return &s.DeltasMerged }},
	refitMetricDeltasDropped: {"mvml_refit_deltas_dropped_total", metrics.Counter, "Deltas dropped as repeats of deltas merged (a producer's retry).", func(s *Stats) any { return &s.DeltasDropped }},
	refitMetricDeltasRefused: {"mvml_refit_deltas_refused_total", metrics.Counter, "Deltas refused because labels of theirs were merged before, in other deltas.", func(s *Stats) any { return &s.DeltasRefused }},
	refitMetricDeltasCorrupt: {"mvml_refit_deltas_corrupt_total", metrics.Counter, "Messages of the stats topic that are not whole deltas (damaged, truncated, a blob never completed), skipped.", func(s *Stats) any { return &s.DeltasCorrupt }},
	refitMetricDeltasSkipped: {"mvml_refit_deltas_skipped_total", metrics.Counter, "Deltas of another lineage than the current model's, skipped.", func(s *Stats) any { return &s.DeltasSkipped }},
	refitMetricRowsMerged:    {"mvml_refit_rows_merged_total", metrics.Counter, "Labelled rows of the deltas merged.", func(s *Stats) any { return &s.RowsMerged }},
	refitMetricRowsPending:   {"mvml_refit_rows_pending", metrics.Gauge, "Labelled rows merged since the last refit.", func(s *Stats) any { return &s.RowsPending }},
	refitMetricPublished:     {"mvml_refit_published_total", metrics.Counter, "Refits published to the model store and made current.", func(s *Stats) any { return &s.Published }},
	refitMetricFailed:        {"mvml_refit_failed_total", metrics.Counter, "Refits that failed (the fit, or the publication); tried again later.", func(s *Stats) any { return &s.Failed }},
	refitMetricAbandoned:     {"mvml_refit_abandoned_total", metrics.Counter, "Refits abandoned unpublished: the refitter stopped being active, or the current model changed lineage.", func(s *Stats) any { return &s.Abandoned }},
	refitMetricRejected:      {"mvml_refit_rejected_total", metrics.Counter, "Tuned refits the gate rejected: published as candidates, not made current.", func(s *Stats) any { return &s.Rejected }},
	refitMetricOutcomes: {"mvml_refit_outcomes_total", metrics.CountersBy("outcome"), "Refits by outcome: published (made current), rejected (by the gate: a candidate), failed, abandoned.",
		func(s *Stats) any {
			return []metrics.Sample{{Labels: []string{"published"}, Value: float64(s.Published)}, {Labels: []string{"rejected"}, Value: float64(s.Rejected)},
				{Labels: []string{"failed"}, Value: float64(s.Failed)}, {Labels: []string{"abandoned"}, Value: float64(s.Abandoned)}}
		}},
	refitMetricTuned: {"mvml_refit_tuned", metrics.GaugesBy("param"), "The value of every hyper-parameter the last tuned refit chose (--tune).",
		func(s *Stats) any {
			var out []metrics.Sample
			for _, k := range model.TuneKeys {
				if v, ok := s.Tuned[k]; ok {
					out = append(out, metrics.Sample{Labels: []string{k}, Value: v})
				}
			}
			return out
		}},
	refitMetricLastPublished: {"mvml_refit_last_published_timestamp_seconds", metrics.Gauge, "Unix time of the last refit published, 0 before the first.", func(s *Stats) any { return &s.LastPublished }},
	refitMetricLastRefitSeconds: {"mvml_refit_last_refit_seconds", metrics.Gauge, "Duration of the last refit published, from its start to its checkpoint.",
		func(s *Stats) any { return &s.LastRefitSeconds }},
	refitMetricStatsOffset: {"mvml_refit_stats_offset", metrics.Gauge, "Next offset of the stats topic to be read.", func(s *Stats) any { return &s.StatsOffset }},
	refitMetricModelInfo: {"mvml_model_info", metrics.GaugesBy("version", "lineage"), "The current model of the model store, and the lineage refitted (while active).",
		func(s *Stats) any {
			if s.ModelVersion == "" {
				return []metrics.Sample(nil)
			}
			return []metrics.Sample{{Labels: []string{s.ModelVersion, s.Lineage}, Value: 1}}
		}},
}

// MetricDefs describes the metrics of a Role's /metrics in the order it
// lists them: docs/configuration.md's table of the metrics of mvml refit.
func MetricDefs() []metrics.Def {
	defs := make([]metrics.Def, len(refitMetricDefs))
	for i, d := range refitMetricDefs {
		defs[i] = metrics.Def{Name: d.name, Kind: d.kind, Help: d.help}
	}
	return defs
}

// refitMetrics holds the values of the numbers of a Role, for
// concurrent use; a float64 number keeps its bits.
type refitMetrics [numRefitMetrics]atomic.Int64

func (v *refitMetrics) add(m refitMetric, n int64)        { v[m].Add(n) }
func (v *refitMetrics) set(m refitMetric, n int64)        { v[m].Store(n) }
func (v *refitMetrics) setFloat(m refitMetric, x float64) { v[m].Store(int64(math.Float64bits(x))) }

// Stats returns the numbers. Safe for concurrent use.
func (r *Role) Stats() Stats {
	r.mu.Lock()
	st := Stats{Lineage: r.lineage, ModelVersion: r.version, Running: r.running.Load()}
	if r.tuned != nil {
		st.Tuned = maps.Clone(map[string]float64(r.tuned))
	}
	r.mu.Unlock()
	for m, def := range refitMetricDefs {
		switch field := def.field(&st).(type) {
		case *int64:
			*field = r.metrics[m].Load()
		case *float64:
			*field = math.Float64frombits(uint64(r.metrics[m].Load()))
		}
	}
	return st
}

// newRefitterCollector is the collector of the numbers of r as
// refitMetricDefs defines them.
func newRefitterCollector(r *Role) *metrics.Collector[Stats] {
	return metrics.NewCollector(MetricDefs(), r.Stats, func(st *Stats, m int) any { return refitMetricDefs[m].field(st) })
}

// ServeHTTP answers /healthz (200 while Run runs), /readyz (200 while
// active with a current model to refit; 503 with the reason otherwise:
// "standby", joining the group, waiting for a model) and /metrics (the
// numbers of refitMetricDefs, the Go runtime's and the process's, in
// Prometheus' formats).
func (r *Role) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch req.URL.Path {
	case "/healthz":
		if !r.running.Load() {
			http.Error(w, "not running", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	case "/readyz":
		r.mu.Lock()
		role, detail, lineage := r.role, r.detail, r.lineage
		r.mu.Unlock()
		if !r.running.Load() || role != roleActive || lineage == "" {
			http.Error(w, detail, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, detail)
	case "/metrics":
		r.metricsHandler.ServeHTTP(w, req)
	default:
		http.NotFound(w, req)
	}
}
