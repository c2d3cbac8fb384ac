package serve

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"
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

func (d *dataset) row(l, i int) []float64 { return d.views[l][i*d.dims[l] : (i+1)*d.dims[l]] }

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

// writeCSV writes d as CSV in the flat layout; edit may replace cells
// (row index, column name → text) to plant bad values.
func writeCSV(t testing.TB, path string, spec *schemas.ViewSpec, d *dataset, edit map[int]map[string]string) {
	t.Helper()
	var b strings.Builder
	header := []string{"id", "label"}
	for l := range spec.Views {
		header = append(header, spec.Views[l].ColumnNames()...)
	}
	b.WriteString(strings.Join(header, ",") + "\n")
	for i := range d.rows() {
		cells := []string{strconv.FormatInt(d.ids[i], 10), strconv.FormatFloat(d.labels[i], 'g', -1, 64)}
		for l := range spec.Views {
			for _, v := range d.row(l, i) {
				cells = append(cells, strconv.FormatFloat(v, 'g', -1, 64))
			}
		}
		for col, text := range edit[i] {
			cells[indexOf(header, col)] = text
		}
		b.WriteString(strings.Join(cells, ",") + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	panic("no column " + x)
}

// inputRecord is rows [lo, hi) of d as a canonical record, every label
// given.
func inputRecord(mem memory.Allocator, spec *schemas.ViewSpec, d *dataset, lo, hi int) arrow.Record {
	b := schemas.NewRecordBuilder(mem, spec)
	defer b.Release()
	n := hi - lo
	b.Reserve(n)
	copy(b.IDs(), d.ids[lo:hi])
	copy(b.Labels(), d.labels[lo:hi])
	b.SetLabelsValid(0, n, true)
	for l, dim := range d.dims {
		copy(b.View(l), d.views[l][lo*dim:hi*dim])
	}
	b.SetLen(n)
	return b.NewRecord()
}

func trainTestModel(t testing.TB, spec *schemas.ViewSpec, d *dataset) *model.Model {
	t.Helper()
	m, err := model.Train(context.Background(), spec, d.matrices(), d.labels, trainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed = 24, 3 }))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// expectedScores scores rows of d directly with the model's scorer.
func expectedScores(m *model.Model, d *dataset) (dec *mat.Dense, pred []float64) {
	dec = &mat.Dense{}
	m.NewScorer().Score(dec, nil, d.matrices())
	for i := range d.rows() {
		pred = append(pred, m.Predict(dec.RawRowView(i)))
	}
	return dec, pred
}

func tempPath(t testing.TB, name string) string { return filepath.Join(t.TempDir(), name) }

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

func prefixRows(d *dataset, rows int) [][]float64 {
	out := make([][]float64, len(d.views))
	for l, v := range d.views {
		out[l] = v[:rows*d.dims[l]]
	}
	return out
}
