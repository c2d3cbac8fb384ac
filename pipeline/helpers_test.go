package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
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

// writeParquet writes d as a Parquet file in the flat input layout, with
// float32 features when f32 (as a feature store would).
func writeParquet(t testing.TB, path string, spec *schemas.ViewSpec, d *dataset, f32 bool) {
	t.Helper()
	schema := schemas.InputSchema(spec)
	flat := make(map[string][]string)
	for l := range spec.Views {
		flat[spec.Views[l].Name] = spec.Views[l].ColumnNames()
	}
	out, err := sink.Create(path, schema, sink.ParquetOptions{Flatten: flat, Float32: f32})
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 16384
	mem := memory.NewGoAllocator()
	for lo := 0; lo < d.rows(); lo += chunk {
		hi := min(lo+chunk, d.rows())
		rec := inputRecord(mem, spec, d, lo, hi)
		err := out.Write(context.Background(), rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
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

// scoreLine is one row of a JSON Lines score output.
type scoreLine struct {
	ID            int64     `json:"id"`
	ModelVersion  string    `json:"model_version"`
	Prediction    float64   `json:"prediction"`
	Decision      []float64 `json:"decision"`
	Contributions []float64 `json:"contributions"`
}

func readScores(t testing.TB, path string) []scoreLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []scoreLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s scoreLine
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func readRejects(t testing.TB, path string) []schemas.RowError {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []schemas.RowError
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var e schemas.RowError
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		out = append(out, e)
	}
	return out
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

func closeTo(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// dirEntries lists the names in dir, to show that failed jobs leave no
// staging or temporary files behind.
func dirEntries(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// peakAllocator records the most bytes it had allocated at any time.
type peakAllocator struct {
	memory.Allocator
	cur, peak atomic.Int64
}

func (p *peakAllocator) grow(delta int64) {
	now := p.cur.Add(delta)
	for {
		old := p.peak.Load()
		if now <= old || p.peak.CompareAndSwap(old, now) {
			return
		}
	}
}

func (p *peakAllocator) Allocate(size int) []byte {
	p.grow(int64(size))
	return p.Allocator.Allocate(size)
}

func (p *peakAllocator) Reallocate(size int, b []byte) []byte {
	p.grow(int64(size - len(b)))
	return p.Allocator.Reallocate(size, b)
}

func (p *peakAllocator) Free(b []byte) {
	p.grow(-int64(len(b)))
	p.Allocator.Free(b)
}

// trainWith is model.DefaultTrainConfig changed by set, so that a test
// names only the values it is about.
func trainWith(set func(*model.TrainConfig)) model.TrainConfig {
	c := model.DefaultTrainConfig()
	set(&c)
	return c
}
