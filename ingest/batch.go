package ingest

import (
	"cmp"
	"slices"

	"github.com/mvml/mvml/schemas"
)

// rejectSet collects the rejected rows of a batch being decoded column by
// column: the first problem found in a row is the one reported.
type rejectSet struct {
	bad  []bool // by batch row
	errs []schemas.RowError
}

func (s *rejectSet) reset(capacity int) {
	s.bad = slices.Grow(s.bad[:0], capacity)[:capacity]
	clear(s.bad)
	s.errs = nil
}

func (s *rejectSet) add(i int, e schemas.RowError) {
	if s.bad[i] {
		return
	}
	s.bad[i] = true
	s.errs = append(s.errs, e)
}

// sorted returns the rejects in row order.
func (s *rejectSet) sorted() []schemas.RowError {
	slices.SortStableFunc(s.errs, func(a, b schemas.RowError) int { return cmp.Compare(a.Row, b.Row) })
	return s.errs
}
