package refit

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	prommodel "github.com/prometheus/common/model"

	"github.com/prometheus/common/expfmt"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
)

const testSpecJSON = `{
  "task": "classification",
  "views": [
    {"name": "a", "prefix": "a_", "dim": 2},
    {"name": "b", "prefix": "b_", "dim": 3},
    {"name": "c", "prefix": "c_", "dim": 2}
  ]
}`

func testSpec(t testing.TB) *schemas.ViewSpec {
	t.Helper()
	spec, err := schemas.ParseViewSpec([]byte(testSpecJSON))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// dataset is rows held in memory: ids, labels and views[l] row-major.
type dataset struct {
	ids    []int64
	labels []float64
	views  [][]float64
	dims   []int
}

func (d *dataset) rows() int { return len(d.ids) }

func (d *dataset) matrices() []*mat.Dense {
	out := make([]*mat.Dense, len(d.views))
	for l, v := range d.views {
		out[l] = mat.NewDense(d.rows(), d.dims[l], v)
	}
	return out
}

// makeData draws n rows for spec whose binary label depends on all views.
func makeData(spec *schemas.ViewSpec, n int, seed uint64) *dataset {
	rng := rand.New(rand.NewPCG(seed, 7))
	d := &dataset{dims: spec.Dims(), views: make([][]float64, len(spec.Views))}
	for i := range n {
		d.ids = append(d.ids, int64(1000+i))
		var s float64
		for l, dim := range d.dims {
			for j := range dim {
				v := rng.NormFloat64()
				d.views[l] = append(d.views[l], v)
				if j == 0 {
					s += v
				}
			}
		}
		d.labels = append(d.labels, map[bool]float64{true: 1, false: 0}[s > 0])
	}
	return d
}

// trainWith is model.DefaultTrainConfig changed by set, so that a test
// names only the values it is about.
func trainWith(set func(*model.TrainConfig)) model.TrainConfig {
	c := model.DefaultTrainConfig()
	set(&c)
	return c
}

// benchSpec is the spec of three views of dim columns each, for benchmarks.
func benchSpec(b *testing.B, dim int) *schemas.ViewSpec {
	spec, err := schemas.ParseViewSpec([]byte(fmt.Sprintf(`{"task": "classification", "views": [
		{"name": "a", "prefix": "a_", "dim": %[1]d},
		{"name": "b", "prefix": "b_", "dim": %[1]d},
		{"name": "c", "prefix": "c_", "dim": %[1]d}]}`, dim)))
	if err != nil {
		b.Fatal(err)
	}
	return spec
}

// openModelTopic opens the model topic of c for a test.
func openModelTopic(t *testing.T, c *kafkatest.Cluster) *registry.Kafka {
	t.Helper()
	k, err := registry.OpenKafka(context.Background(), registry.KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "models"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close(context.Background()) })
	return k
}

// parseMetrics reads a Prometheus text exposition with Prometheus' own
// parser.
func parseMetrics(t *testing.T, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(prommodel.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return families
}

// metricValue is the value of the counter or gauge name whose labels
// include the given name, value pairs; it fails the test when there is
// none.
func metricValue(t *testing.T, families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f := families[name]
	if f == nil {
		t.Fatalf("/metrics lacks %s", name)
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("/metrics lacks %s%v", name, labels)
	return 0
}

// waitFor polls cond until it holds or the time runs out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
