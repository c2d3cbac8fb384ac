package main

import (
	"slices"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/schemas"
)

// The demo's rows reach its files as they were generated, every label
// given.
func TestDemoRecord(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	spec, err := schemas.ParseViewSpec([]byte(demoSpecJSON))
	if err != nil {
		t.Fatal(err)
	}
	d := generateDemo(30, 3, 1).slice(5, 25)
	rec := d.record(mem, spec)
	defer rec.Release()
	if !rec.Schema().Equal(schemas.InputSchema(spec)) || rec.NumRows() != 20 {
		t.Fatalf("record of %d rows, schema %v", rec.NumRows(), rec.Schema())
	}
	if ids := schemas.IDs(rec).Int64Values(); !slices.Equal(ids, d.ids) {
		t.Errorf("ids %v, want %v", ids, d.ids)
	}
	labels := schemas.Labels(rec)
	if labels.NullN() != 0 || !slices.Equal(labels.Float64Values(), d.labels) {
		t.Errorf("labels %v (%d null), want %v", labels, labels.NullN(), d.labels)
	}
	for l := range spec.Views {
		if vals, _ := schemas.ViewValues(rec, l); !slices.Equal(vals, d.views[l]) {
			t.Errorf("view %d: %v, want %v", l, vals, d.views[l])
		}
	}
}
