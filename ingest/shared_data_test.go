package ingest

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mvml/mvml/schemas"
)

// sharedData is the reference data next to the repository, or a skip.
func sharedData(t *testing.T, set string) (dir string, spec *schemas.ViewSpec) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no runs on the shared data sets")
	}
	dir = filepath.Join("..", "..", "shared", "data", set)
	if _, err := os.Stat(filepath.Join(dir, "views.json")); err != nil {
		t.Skipf("reference data %s not present: %v", set, err)
	}
	spec, err := schemas.LoadViewSpec(filepath.Join(dir, "views.json"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, spec
}

// readShared reads a reference file whole, checking each record with
// schemas.CheckRecord.
func readShared(t *testing.T, spec *schemas.ViewSpec, path string) readResult {
	t.Helper()
	mem := checkedAllocator(t)
	src, err := Open(context.Background(), spec, []string{path}, Options{Allocator: mem, BatchSize: 1000, RequireLabel: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	res := readResult{views: make([][]float64, len(spec.Views))}
	for {
		b, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if bad := schemas.CheckRecord(b.Record, spec, true, b.Source, 0); len(bad) > 0 {
			t.Errorf("CheckRecord: %v", bad[0])
		}
		res.ids = append(res.ids, schemas.IDs(b.Record).Int64Values()...)
		for _, v := range schemas.Labels(b.Record).Float64Values() {
			res.labels = append(res.labels, v)
		}
		for l := range spec.Views {
			vals, _ := schemas.ViewValues(b.Record, l)
			res.views[l] = append(res.views[l], vals...)
		}
		res.rows = append(res.rows, b.Rows...)
		res.rejects = append(res.rejects, b.Rejects...)
		b.Record.Release()
	}
	if len(res.rejects) > 0 {
		t.Errorf("%d rejects, first %v", len(res.rejects), res.rejects[0])
	}
	return res
}

func TestSharedUWave(t *testing.T) {
	dir, spec := sharedData(t, "uwave_ucr")
	path := filepath.Join(dir, "train.csv.gz")
	res := readShared(t, spec, path)
	if len(res.ids) != 896 {
		t.Fatalf("%d rows, want 896", len(res.ids))
	}
	ids := slices.Clone(res.ids)
	slices.Sort(ids)
	for i, id := range ids {
		if id != int64(i) {
			t.Fatalf("ids are not 0..895: sorted[%d] = %d", i, id)
		}
	}
	counts := map[float64]int{}
	for _, l := range res.labels {
		counts[l.(float64)]++
	}
	want := map[float64]int{1: 122, 2: 108, 3: 106, 4: 110, 5: 127, 6: 111, 7: 112, 8: 100}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("class counts %v, want %v", counts, want)
	}

	// x_0 of row 0 is exactly the number written in the file.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReaderSize(zr, 1<<16)
	header, _ := lines.ReadString('\n')
	first, _ := lines.ReadString('\n')
	col := slices.Index(strings.Split(strings.TrimSpace(header), ","), "x_0")
	text := strings.Split(strings.TrimSpace(first), ",")[col]
	x0, err := strconv.ParseFloat(text, 64)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.views[0][0]; math.Float64bits(got) != math.Float64bits(x0) {
		t.Errorf("x_0 of row 0 = %v, the file says %s", got, text)
	}
}

func TestSharedSarcos(t *testing.T) {
	dir, spec := sharedData(t, "sarcos")
	res := readShared(t, spec, filepath.Join(dir, "test.csv.gz"))
	if len(res.ids) != 4449 {
		t.Fatalf("%d rows, want 4449", len(res.ids))
	}
	for l, dim := range spec.Dims() {
		if len(res.views[l]) != 4449*dim {
			t.Errorf("view %s has %d values, want %d", spec.Views[l].Name, len(res.views[l]), 4449*dim)
		}
	}
}
