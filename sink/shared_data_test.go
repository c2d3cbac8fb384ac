package sink

import (
	"compress/gzip"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/schemas"
)

// sharedData is the reference data directory, beside the repository.
var sharedData = filepath.Join("..", "..", "shared", "data")

// readUWave reads the uWave training set as a canonical record and the CSV
// header.
func readUWave(t *testing.T, mem memory.Allocator) (*schemas.ViewSpec, arrow.Record, []string) {
	t.Helper()
	dir := filepath.Join(sharedData, "uwave_ucr")
	if _, err := os.Stat(filepath.Join(dir, "train.csv.gz")); err != nil {
		t.Skipf("uWave data not available: %v", err)
	}
	spec, err := schemas.LoadViewSpec(filepath.Join(dir, "views.json"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "train.csv.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(gz).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	header, rows := rows[0], rows[1:]
	want := append([]string{spec.ID, spec.Label}, flatColumnNames(spec)...)
	if !slices.Equal(header, want) {
		t.Fatalf("CSV header is not id, label, then the views' columns")
	}
	num := func(r, c int) float64 {
		v, err := strconv.ParseFloat(rows[r][c], 64)
		if err != nil {
			t.Fatalf("row %d column %s: %v", r, header[c], err)
		}
		return v
	}
	b := schemas.NewRecordBuilder(mem, spec)
	defer b.Release()
	b.Reserve(len(rows))
	views := make([][]float64, len(spec.Views))
	for l, d := range spec.Dims() {
		views[l] = make([]float64, d)
	}
	for r := range rows {
		c := 2
		for _, v := range views {
			for j := range v {
				v[j] = num(r, c)
				c++
			}
		}
		b.Append(int64(num(r, 0)), num(r, 1), true, views)
	}
	return spec, b.NewRecord(), header
}

func flatColumnNames(spec *schemas.ViewSpec) []string {
	var names []string
	for _, v := range spec.Views {
		names = append(names, v.ColumnNames()...)
	}
	return names
}

// TestParquetWritesUWaveInInputLayout writes the real uWave training set
// flattened, as the input files are laid out, and reads it back.
func TestParquetWritesUWaveInInputLayout(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	spec, rec, header := readUWave(t, mem)
	defer rec.Release()
	opts := ParquetOptions{Flatten: map[string][]string{}, RowGroupRows: 500}
	for _, v := range spec.Views {
		opts.Flatten[v.Name] = v.ColumnNames()
	}
	data := writeParquet(t, rec.Schema(), opts, []arrow.Record{rec})
	want := expectedColumns(t, []arrow.Record{rec}, opts)
	for i, w := range want {
		if w.name != header[i] {
			t.Fatalf("file column %d is %q, the CSV's is %q", i, w.name, header[i])
		}
	}
	checkArrowRead(t, data, want)
	if f := checkParquetGoRead(t, data, want); len(f.RowGroups()) != 2 {
		t.Errorf("%d row groups, want 2", len(f.RowGroups()))
	}
}
