package pipelinetest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// SpecJSON is the view spec of the tests: a classification over three
// small views a, b and c.
const SpecJSON = `{
  "task": "classification",
  "views": [
    {"name": "a", "prefix": "a_", "dim": 2},
    {"name": "b", "prefix": "b_", "dim": 3},
    {"name": "c", "prefix": "c_", "dim": 2}
  ]
}`

// Spec is SpecJSON parsed.
func Spec(t testing.TB) *schemas.ViewSpec {
	t.Helper()
	spec, err := schemas.ParseViewSpec([]byte(SpecJSON))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// BenchSpec is the spec of three views of dim columns each, for benchmarks.
func BenchSpec(t testing.TB, dim int) *schemas.ViewSpec {
	t.Helper()
	spec, err := schemas.ParseViewSpec([]byte(fmt.Sprintf(`{"task": "classification", "views": [
		{"name": "a", "prefix": "a_", "dim": %[1]d},
		{"name": "b", "prefix": "b_", "dim": %[1]d},
		{"name": "c", "prefix": "c_", "dim": %[1]d}]}`, dim)))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// Dataset is rows held in memory: IDs, Labels and Views[l] row-major with
// Dims[l] columns.
type Dataset struct {
	IDs    []int64
	Labels []float64
	Views  [][]float64
	Dims   []int
}

// Rows is the number of rows of d.
func (d *Dataset) Rows() int { return len(d.IDs) }

// Row is the features of row i in view l.
func (d *Dataset) Row(l, i int) []float64 { return d.Views[l][i*d.Dims[l] : (i+1)*d.Dims[l]] }

// Matrices is the views of d as matrices sharing its storage.
func (d *Dataset) Matrices() []*mat.Dense {
	out := make([]*mat.Dense, len(d.Views))
	for l, v := range d.Views {
		out[l] = mat.NewDense(d.Rows(), d.Dims[l], v)
	}
	return out
}

// PrefixRows is the first rows rows of every view of d, sharing its
// storage.
func PrefixRows(d *Dataset, rows int) [][]float64 {
	out := make([][]float64, len(d.Views))
	for l, v := range d.Views {
		out[l] = v[:rows*d.Dims[l]]
	}
	return out
}

// MakeData draws n rows for spec whose binary label depends on all views.
func MakeData(spec *schemas.ViewSpec, n int, seed uint64) *Dataset {
	rng := rand.New(rand.NewPCG(seed, 7))
	d := &Dataset{Dims: spec.Dims(), Views: make([][]float64, len(spec.Views))}
	for i := range n {
		d.IDs = append(d.IDs, int64(1000+i))
		var s float64
		for l, dim := range d.Dims {
			for j := range dim {
				v := rng.NormFloat64()
				d.Views[l] = append(d.Views[l], v)
				if j == 0 {
					s += v
				}
			}
		}
		d.Labels = append(d.Labels, map[bool]float64{true: 1, false: 0}[s > 0])
	}
	return d
}

// WriteCSV writes d as CSV in the flat layout; edit may replace cells
// (row index, column name → text) to plant bad values.
func WriteCSV(t testing.TB, path string, spec *schemas.ViewSpec, d *Dataset, edit map[int]map[string]string) {
	t.Helper()
	var b strings.Builder
	header := []string{"id", "label"}
	for l := range spec.Views {
		header = append(header, spec.Views[l].ColumnNames()...)
	}
	b.WriteString(strings.Join(header, ",") + "\n")
	for i := range d.Rows() {
		cells := []string{strconv.FormatInt(d.IDs[i], 10), strconv.FormatFloat(d.Labels[i], 'g', -1, 64)}
		for l := range spec.Views {
			for _, v := range d.Row(l, i) {
				cells = append(cells, strconv.FormatFloat(v, 'g', -1, 64))
			}
		}
		for col, text := range edit[i] {
			cells[IndexOf(header, col)] = text
		}
		b.WriteString(strings.Join(cells, ",") + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// IndexOf is the index of x in xs; it panics when there is none.
func IndexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	panic("no column " + x)
}

// InputRecord is rows [lo, hi) of d as a canonical record, every label
// given.
func InputRecord(mem memory.Allocator, spec *schemas.ViewSpec, d *Dataset, lo, hi int) arrow.Record {
	b := schemas.NewRecordBuilder(mem, spec)
	defer b.Release()
	n := hi - lo
	b.Reserve(n)
	copy(b.IDs(), d.IDs[lo:hi])
	copy(b.Labels(), d.Labels[lo:hi])
	b.SetLabelsValid(0, n, true)
	for l, dim := range d.Dims {
		copy(b.View(l), d.Views[l][lo*dim:hi*dim])
	}
	b.SetLen(n)
	return b.NewRecord()
}
