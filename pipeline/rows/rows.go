package rows

import (
	"cmp"
	"slices"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
)

// Scorer scores canonical records with one model into output records
// of schema (schemas.OutputSchema; with contributions when the schema has
// their column). It reuses its buffers; not safe for concurrent use.
type Scorer struct {
	model   *model.Model
	scorer  *model.Scorer
	dec     mat.Dense
	contrib *mat.Dense
	pred    []float64
	// u holds the projected features of the last batch scored with them
	// kept (Score's project), a row per record row.
	u   mat.Dense
	out *schemas.OutputBuilder
}

// NewScorer returns a Scorer of m's rows into records of schema, built
// with mem.
func NewScorer(m *model.Model, schema *arrow.Schema, mem memory.Allocator) *Scorer {
	s := &Scorer{model: m, scorer: m.NewScorer(), out: schemas.NewOutputBuilder(mem, schema)}
	if schema.HasField(schemas.FieldContributions) {
		s.contrib = &mat.Dense{}
	}
	return s
}

// Model is the model s scores with.
func (s *Scorer) Model() *model.Model { return s.model }

// Projected is the projected features of the rows of the last batch
// scored with project, a row per record row; it is reused by the next.
func (s *Scorer) Projected() *mat.Dense { return &s.u }

// Predictions is the predictions of the rows of the last batch scored,
// a value per record row (those of skipped rows are meaningless); it is
// reused by the next.
func (s *Scorer) Predictions() []float64 { return s.pred }

// Score scores the rows of b's record not marked in skip (nil: all
// rows). It returns their output record, or nil when no row is left; the
// rows whose decision or contributions are not finite numbers (values too
// large for the model), which are left out of it, as bad rows located in
// b's input; and skip marking those rows too (allocated when needed).
// With project, it keeps the rows' projected features (Projected) and
// scores from them, so that each row's kernels are computed once for the score,
// the refit statistics and the join of late labels.
func (s *Scorer) Score(b ingest.Batch, skip []bool, project bool) (arrow.Record, []schemas.RowError, []bool) {
	rec := b.Record
	n := int(rec.NumRows())
	kept := n
	for _, bad := range skip {
		if bad {
			kept--
		}
	}
	if kept == 0 {
		return nil, nil, skip
	}
	m := s.model
	// Rows are scored independently, so the few bad rows are scored
	// along with the others and left out below.
	s.pred = slices.Grow(s.pred[:0], n)[:n]
	var unscorable []schemas.RowError
	views := model.ViewsOf(rec, len(m.Spec.Views))
	var bad []model.Unscorable
	if project {
		bad = s.scorer.ProjectPredict(&s.u, s.pred, &s.dec, s.contrib, views)
	} else {
		bad = s.scorer.Predict(s.pred, &s.dec, s.contrib, views)
	}
	for _, u := range bad {
		if skip != nil && skip[u.Row] {
			continue
		}
		if skip == nil {
			skip = make([]bool, n)
		}
		skip[u.Row] = true
		kept--
		unscorable = append(unscorable, Unscorable(b, u))
	}
	if kept == 0 {
		return nil, unscorable, skip
	}
	s.out.Reserve(kept)
	ids := schemas.IDs(rec).Int64Values()
	var contrib []float64
	for i := range n {
		if skip != nil && skip[i] {
			continue
		}
		if s.contrib != nil {
			contrib = s.contrib.RawRowView(i)
		}
		s.out.Append(ids[i], m.Version, s.pred[i], s.dec.RawRowView(i), contrib)
	}
	return s.out.NewRecord(), unscorable, skip
}

// Unscorable is the bad row of b that model.Scorer.Predict reported as u,
// located in the input, with the row as its input format carries one.
func Unscorable(b ingest.Batch, u model.Unscorable) schemas.RowError {
	e := *u.RowError()
	e.Source, e.Row = b.RowSource(u.Row), b.Rows[u.Row]
	withPayload(&e, b, u.Row)
	return e
}

// Merge merges two lists of bad rows, each in input order, into
// one in input order.
func Merge(a, b []schemas.RowError) []schemas.RowError {
	if len(b) == 0 {
		return a
	}
	out := append(slices.Clone(a), b...)
	slices.SortStableFunc(out, func(x, y schemas.RowError) int { return cmp.Compare(x.Row, y.Row) })
	return out
}

// withPayload gives e, the bad row of b's record row i, the row as its
// input format carries one, when it can (ingest.Batch.RowPayload).
func withPayload(e *schemas.RowError, b ingest.Batch, i int) {
	if b.RowPayload != nil {
		e.Payload, e.ContentType = b.RowPayload(i)
	}
}

// Bad lists the bad rows of a batch in input order: the rows ingest
// could not decode and the rows of its record that schemas.CheckRecord
// refuses, located by input row. skip marks the refused record rows (nil
// when there are none).
func Bad(spec *schemas.ViewSpec, b ingest.Batch, needLabel bool) (bad []schemas.RowError, skip []bool) {
	checked := schemas.CheckRecord(b.Record, spec, needLabel, b.Source, 0)
	if len(b.Rejects) == 0 && len(checked) == 0 {
		return nil, nil
	}
	bad = slices.Clone(b.Rejects)
	if len(checked) > 0 {
		skip = make([]bool, b.Record.NumRows())
		for _, e := range checked {
			skip[e.Row] = true
			// CheckRecord counts record rows; rejected rows were taken
			// out of the record, so map back to the input row.
			i := int(e.Row)
			e.Source, e.Row = b.RowSource(i), b.Rows[i]
			withPayload(&e, b, i)
			bad = append(bad, e)
		}
		slices.SortStableFunc(bad, func(x, y schemas.RowError) int { return cmp.Compare(x.Row, y.Row) })
	}
	return bad, skip
}
