package metrics

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Def is the description of one metric as docs/configuration.md's tables
// list it: its Prometheus name, kind and help.
type Def struct {
	Name string
	Kind Kind
	Help string
}

// Histogram is a distribution of observations: Counts[i] of them were at
// most Bounds[i] (cumulative, as Prometheus counts), Count in all, adding
// up to Sum.
type Histogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"counts"`
	Count  uint64    `json:"count"`
	Sum    float64   `json:"sum"`
}

// Kind is the Prometheus type of a metric and the names of its
// labels or, for a histogram, its bucket bounds.
type Kind struct {
	Type    string // "counter", "gauge" or "histogram"
	Labels  []string
	Buckets []float64
}

// The kinds of the metrics without labels.
var (
	Counter = Kind{Type: "counter"}
	Gauge   = Kind{Type: "gauge"}
)

// CountersBy and GaugesBy are the kinds of metrics with labels: one
// series per combination of label values.
func CountersBy(labels ...string) Kind { return Kind{Type: "counter", Labels: labels} }
func GaugesBy(labels ...string) Kind   { return Kind{Type: "gauge", Labels: labels} }

// HistogramOf is the kind of a histogram with the given bucket bounds.
func HistogramOf(buckets []float64) Kind { return Kind{Type: "histogram", Buckets: buckets} }

// ValueType is the Prometheus value type of a counter or gauge of kind k.
func (k Kind) ValueType() prometheus.ValueType {
	if k.Type == "counter" {
		return prometheus.CounterValue
	}
	return prometheus.GaugeValue
}

// Sample is one series of a metric with labels: the label values, in the
// order of its kind's labels, and the value.
type Sample struct {
	Labels []string
	Value  float64
}

// LabelledInt is the field of a row that holds the series of one value
// of its one label (rows of one name follow each other; the first has the
// help): Label is the value, Value the count.
type LabelledInt struct {
	Label string
	Value *int64
}

// Send sends the samples of field, a metric's field of a role's
// Stats (an *int64, *float64, *map[string]int64 counted by its one label,
// []Sample, LabelledInt or *Histogram), as metrics of desc; a field of a type no row should have is an
// error of the scrape rather than a number left out.
func Send(ch chan<- prometheus.Metric, desc *prometheus.Desc, vt prometheus.ValueType, name string, field any) {
	send := func(x prometheus.Metric, err error) {
		if err != nil {
			x = prometheus.NewInvalidMetric(desc, err)
		}
		ch <- x
	}
	switch field := field.(type) {
	case *int64:
		send(prometheus.NewConstMetric(desc, vt, float64(*field)))
	case *float64:
		send(prometheus.NewConstMetric(desc, vt, *field))
	case *map[string]int64:
		for label, n := range *field {
			send(prometheus.NewConstMetric(desc, vt, float64(n), label))
		}
	case []Sample:
		for _, x := range field {
			send(prometheus.NewConstMetric(desc, vt, x.Value, x.Labels...))
		}
	case LabelledInt:
		send(prometheus.NewConstMetric(desc, vt, float64(*field.Value), field.Label))
	case *Histogram:
		buckets := make(map[float64]uint64, len(field.Bounds))
		for i, b := range field.Bounds {
			buckets[b] = field.Counts[i]
		}
		send(prometheus.NewConstHistogram(desc, field.Count, field.Sum, buckets))
	default:
		send(nil, fmt.Errorf("%s: field of type %T", name, field))
	}
}

// Handler serves the metrics of cs and of the Go runtime and
// the process in Prometheus' formats, from a registry of its own (not the
// global one, so that two services in one process do not collide).
// Errors of a scrape are logged and fail it.
func Handler(logger *slog.Logger, cs ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(cs...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelError)})
}

// Collector is the Prometheus collector of a role's numbers, as its
// table of rows defines them: at every scrape it takes one Stats S from
// stats and sends field(st, m), row m's field of it, with Send as defs[m]
// describes it. Consecutive rows of one name are the series of one metric
// (rows of a LabelledInt) and share its description, the first row's.
type Collector[S any] struct {
	defs  []Def
	stats func() S
	field func(st *S, m int) any
	descs []*prometheus.Desc
}

// NewCollector returns the collector of the numbers defs describe, read
// from stats by field.
func NewCollector[S any](defs []Def, stats func() S, field func(st *S, m int) any) *Collector[S] {
	c := &Collector[S]{defs: defs, stats: stats, field: field, descs: make([]*prometheus.Desc, len(defs))}
	for m, def := range defs {
		if m > 0 && defs[m-1].Name == def.Name {
			c.descs[m] = c.descs[m-1]
			continue
		}
		c.descs[m] = prometheus.NewDesc(def.Name, def.Help, def.Kind.Labels, nil)
	}
	return c
}

// Describe sends the description of every metric once.
func (c *Collector[S]) Describe(ch chan<- *prometheus.Desc) {
	for m, d := range c.descs {
		if m == 0 || d != c.descs[m-1] {
			ch <- d
		}
	}
}

// Collect sends every number of one Stats.
func (c *Collector[S]) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	for m, def := range c.defs {
		Send(ch, c.descs[m], def.Kind.ValueType(), def.Name, c.field(&st, m))
	}
}
