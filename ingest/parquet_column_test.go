package ingest

import (
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"

	"github.com/mvml/mvml/schemas"
)

// levelPage is a page of a list column given by its levels, as written by
// older writers whose data pages (v1) may end in the middle of a row — which
// parquet-go's own writer never does. Only the methods the reader uses are
// implemented.
type levelPage struct {
	parquet.Page
	rep, def []byte
	vals     []float32
}

func (p *levelPage) RepetitionLevels() []byte       { return p.rep }
func (p *levelPage) DefinitionLevels() []byte       { return p.def }
func (p *levelPage) Data() encoding.Values          { return encoding.FloatValues(p.vals) }
func (p *levelPage) Dictionary() parquet.Dictionary { return nil }

type fakePages struct{ pages []parquet.Page }

func (f *fakePages) ReadPage() (parquet.Page, error) {
	if len(f.pages) == 0 {
		return nil, io.EOF
	}
	p := f.pages[0]
	f.pages = f.pages[1:]
	return p, nil
}
func (f *fakePages) SeekToRow(int64) error { return errors.New("not supported") }
func (f *fakePages) Close() error          { return nil }

func TestListRowsSpanningPages(t *testing.T) {
	// Four rows of a list of 3 (maxRep 1, maxDef 2: the element is optional):
	// [1 2 3] [4 5 6] [7 null 9] [10 11 12], cut across pages mid-row, with an
	// empty page in between.
	pages := []parquet.Page{
		&levelPage{rep: []byte{0, 1, 1, 0, 1}, def: []byte{2, 2, 2, 2, 2}, vals: []float32{1, 2, 3, 4, 5}},
		&levelPage{},
		&levelPage{rep: []byte{1, 0, 1}, def: []byte{2, 2, 1}, vals: []float32{6, 7}},
		&levelPage{rep: []byte{1, 0, 1, 1}, def: []byte{2, 2, 2, 2}, vals: []float32{9, 10, 11, 12}},
	}
	c := &columnReader{name: "v", role: roleList, maxDef: 2, maxRep: 1, pages: &fakePages{pages: pages}}
	var rejects rejectSet
	rejects.reset(4)
	sink := rowSink{rejects: &rejects, source: "f", fileRow0: 10}
	dst := make([]float64, 4*3)
	if err := c.lists(dst, 3, &sink, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.close(); err != nil {
		t.Fatalf("close after the last row: %v", err)
	}
	want := []float64{1, 2, 3, 4, 5, 6, 0, 0, 0, 10, 11, 12}
	got := append([]float64(nil), dst...)
	got[6], got[7], got[8] = 0, 0, 0 // row 2 is rejected: its slots are scratch
	if !reflect.DeepEqual(got, want) {
		t.Errorf("values = %v, want %v", got, want)
	}
	wantRejects := []schemas.RowError{{Source: "f", Row: 12, Column: "v", Reason: "list has 1 null elements"}}
	if !reflect.DeepEqual(rejects.sorted(), wantRejects) {
		t.Errorf("rejects = %+v, want %+v", rejects.sorted(), wantRejects)
	}
}

func TestColumnChunkDisagreesWithRowGroup(t *testing.T) {
	list := func(pages ...parquet.Page) *columnReader {
		return &columnReader{name: "v", role: roleList, maxDef: 1, maxRep: 1, pages: &fakePages{pages: pages}}
	}
	tests := []struct {
		name   string
		c      *columnReader
		rows   int
		atRead bool
	}{
		{name: "fewer rows than the row group", rows: 2, atRead: true,
			c: list(&levelPage{rep: []byte{0, 1}, def: []byte{1, 1}, vals: []float32{1, 2}})},
		{name: "more rows than the row group", rows: 1,
			c: list(&levelPage{rep: []byte{0, 1, 0, 1}, def: []byte{1, 1, 1, 1}, vals: []float32{1, 2, 3, 4}})},
		{name: "extra page after the last row", rows: 1,
			c: list(&levelPage{rep: []byte{0, 1}, def: []byte{1, 1}, vals: []float32{1, 2}},
				&levelPage{rep: []byte{0, 1}, def: []byte{1, 1}, vals: []float32{3, 4}})},
		{name: "first page starts inside a row", rows: 1, atRead: true,
			c: list(&levelPage{rep: []byte{1, 1}, def: []byte{1, 1}, vals: []float32{1, 2}})},
		{name: "fewer values than defined entries", rows: 1, atRead: true,
			c: list(&levelPage{rep: []byte{0, 1}, def: []byte{1, 1}, vals: []float32{1}})},
		{name: "levels of different lengths", rows: 1, atRead: true,
			c: list(&levelPage{rep: []byte{0, 1}, def: []byte{1}, vals: []float32{1}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rejects rejectSet
			rejects.reset(tc.rows)
			sink := rowSink{rejects: &rejects, source: "f"}
			err := tc.c.lists(make([]float64, 2*tc.rows), 2, &sink, 0)
			if !tc.atRead {
				if err != nil {
					t.Fatalf("reading: %v", err)
				}
				err = tc.c.close()
			}
			if !errors.Is(err, errMalformed) {
				t.Errorf("error %v, want one wrapping errMalformed", err)
			}
		})
	}
}
