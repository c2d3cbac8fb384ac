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
	// Reloads counts the models WatchModel put in service, ReloadFailures
	// the changed model files it could not serve.
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
	ModelVersion     string  `json:"model_version"`
	Running          bool    `json:"running"`
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
	numMetrics
)

// serveMetricDefs defines every number of a Service once: its Prometheus
// name, type and help, and its field in ServeStats (an *int64 or a
// *float64). Stats and /metrics are both read from it.
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
	metricReloads:          {"mvml_model_reloads_total", counter, "Models reloaded from the model file and put in service.", func(s *ServeStats) any { return &s.Reloads }},
	metricReloadFailures:   {"mvml_model_reload_failures_total", counter, "Changed model files that could not be served; the old model stayed in service.", func(s *ServeStats) any { return &s.ReloadFailures }},
	metricNotCommitted:     {"mvml_records_not_committed", gauge, "Records taken and not yet acknowledged.", func(s *ServeStats) any { return &s.NotCommitted }},
	metricPending:          {"mvml_batches_pending", gauge, "Batches written and waiting for their output to commit before they are acknowledged.", func(s *ServeStats) any { return &s.Pending }},
	metricAccumulated:      {"mvml_refit_rows", gauge, "Labelled rows (decayed) in the statistics of the next refit.", func(s *ServeStats) any { return &s.Accumulated }},
	metricLastRefitSeconds: {"mvml_last_refit_seconds", gauge, "Duration of the last refit put in service.", func(s *ServeStats) any { return &s.LastRefitSeconds }},
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
	for m, def := range serveMetricDefs {
		switch field := def.field(&st).(type) {
		case *int64:
			*field = s.metrics[m].Load()
		case *float64:
			*field = math.Float64frombits(uint64(s.metrics[m].Load()))
		}
	}
	return st
}

// writeMetrics writes st in Prometheus' text format.
func writeMetrics(w io.Writer, st ServeStats) {
	for _, def := range serveMetricDefs {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s ", def.name, def.help, def.name, def.kind, def.name)
		switch field := def.field(&st).(type) {
		case *int64:
			fmt.Fprintf(w, "%d\n", *field)
		case *float64:
			fmt.Fprintf(w, "%g\n", *field)
		}
	}
	fmt.Fprintf(w, "# HELP mvml_model_info %s\n# TYPE mvml_model_info %s\nmvml_model_info{version=%q} 1\n", modelInfoHelp, gauge, st.ModelVersion)
}

// readiness is implemented by sources that know whether they are
// consuming, such as ingest.KafkaSource: Ready returns nil when they are,
// or why not.
type readiness interface {
	Ready() error
}

// ServeHTTP answers /healthz (liveness: 200 while Run is serving, 503
// otherwise), /readyz (200 while Run is serving and its source, when it
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
