package model

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// Fold statistics. An accumulator of K folds keeps the sums of every fold
// of the rows apart, each row's fold chosen by a hash of its id (FoldOf),
// so that every replica, shard job and restart puts a row in the same
// fold and folds merge fold by fold. The sums of all the rows are the
// folds merged (in the default build the same bits as one pass over the
// rows, see Stats), and the squared loss of any solution on fold f follows
// from fold f's sums alone: exact K-fold cross-validation without keeping
// a row (Tune). The cost is K times the memory and the statistics
// message: O(K·(vp)²), about K·852 KB at D = 324 and K·4.7 MB at D = 768
// with one output.
const (
	// DefaultFolds is the number of folds a caller asking for fold
	// statistics without a number gets.
	DefaultFolds = 5
	// MaxFolds bounds the number of folds, so that a corrupt count in
	// statistics bytes is caught before it is used.
	MaxFolds = 100
)

// FoldOf is the fold, in [0, k), of the row of record id id: the high
// word of the 128-bit product h·k, with h the output of SplitMix64 from
// the state id (the id's 64 bits, two's complement, plus
// 0x9e3779b97f4a7c15, then its finaliser). It depends on the id and k
// alone, so every process places a row alike; the mix spreads
// consecutive ids evenly over the folds.
func FoldOf(id int64, k int) int {
	if k <= 1 {
		return 0
	}
	h := uint64(id) + 0x9e3779b97f4a7c15
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	hi, _ := bits.Mul64(h, uint64(k))
	return int(hi)
}

// NewFoldAccumulator returns an empty accumulator for m's features and
// targets that keeps k fold sums, 1 ≤ k ≤ MaxFolds: rows are added with
// their ids (AddFolds, AddProjectedFolds). One fold is NewAccumulator, its
// behaviour and its bytes.
func (m *Model) NewFoldAccumulator(k int) (*Accumulator, error) {
	if k < 1 || k > MaxFolds {
		return nil, fmt.Errorf("accumulate: %d folds: want 1 to %d", k, MaxFolds)
	}
	a := m.NewAccumulator()
	for range k - 1 {
		a.folds = append(a.folds, NewStats(m.Features.Ranks(), m.Outputs()))
	}
	if k > 1 {
		a.stats = nil
	}
	return a, nil
}

// Folds is the number of folds the accumulator keeps (1 by default).
func (a *Accumulator) Folds() int { return len(a.folds) }

// FoldRows is the (decayed) number of rows of every fold.
func (a *Accumulator) FoldRows() []float64 {
	out := make([]float64, len(a.folds))
	for f, st := range a.folds {
		out[f] = st.N
	}
	return out
}

// FoldStats returns a copy of the sums of fold f, residues included.
func (a *Accumulator) FoldStats(f int) *Stats { return a.folds[f].Clone() }

// Stats returns a copy of the sums of all the rows, residues included.
func (a *Accumulator) Stats() *Stats { return a.sums().Clone() }

// Clone returns an independent copy of the accumulator, on the same
// model.
func (a *Accumulator) Clone() *Accumulator {
	c := &Accumulator{m: a.m, u: make([]*mat.Dense, len(a.u)), lineage: a.lineage}
	for _, st := range a.folds {
		c.folds = append(c.folds, st.Clone())
	}
	if len(c.folds) == 1 {
		c.stats = c.folds[0]
	}
	return c
}

// AddFolds is Add for rows with their record ids: row i goes to fold
// FoldOf(ids[i], Folds()). As with Add, nothing is added on an error.
func (a *Accumulator) AddFolds(ids []int64, views []*mat.Dense, labels []float64) error {
	if len(views) == len(a.m.Features.Views) && len(views) > 0 {
		if n, _ := views[0].Dims(); n != len(labels) || n != len(ids) {
			return fmt.Errorf("accumulate: %d rows but %d labels and %d ids", n, len(labels), len(ids))
		}
	}
	y, err := a.project(views, labels)
	if y == nil || err != nil {
		return err
	}
	if len(a.folds) == 1 {
		return a.stats.Add(a.u, y)
	}
	a.addFolds(ids, y, func(dst []float64, i int) {
		off := 0
		for _, ul := range a.u {
			_, r := ul.Dims()
			if r > 0 {
				copy(dst[off:off+r], ul.RawRowView(i))
			}
			off += r
		}
	})
	return nil
}

// AddProjectedFolds is AddProjected for rows with their record ids: row i
// goes to fold FoldOf(ids[i], Folds()). As with AddProjected, nothing is
// added on an error.
func (a *Accumulator) AddProjectedFolds(ids []int64, u *mat.Dense, labels []float64) error {
	if len(labels) == 0 && len(ids) == 0 {
		return nil
	}
	n, d := u.Dims()
	if n == 0 {
		return fmt.Errorf("accumulate: no rows but %d labels and %d ids", len(labels), len(ids))
	}
	if d != a.folds[0].Dim() {
		return fmt.Errorf("accumulate: rows of %d features, the model's have %d", d, a.folds[0].Dim())
	}
	if n != len(labels) || n != len(ids) {
		return fmt.Errorf("accumulate: %d rows but %d labels and %d ids", n, len(labels), len(ids))
	}
	y, err := a.m.encode(labels)
	if err != nil {
		return fmt.Errorf("accumulate: %w", err)
	}
	if err := a.m.nonFiniteProjected(u); err != nil {
		return fmt.Errorf("accumulate: %w", err)
	}
	if len(a.folds) == 1 {
		a.stats.addRows(u.RawMatrix(), y)
		return nil
	}
	a.addFolds(ids, y, func(dst []float64, i int) { copy(dst, u.RawRowView(i)) })
	return nil
}

// addFolds adds rows with their targets y (n×k) to the folds of their
// ids, the rows of each fold in one batch: row sets dst (D values) to
// the features of row i. The rows are laid out fold by fold in one
// buffer of n×D values, kept for the next batch as Stats.Add keeps its
// own.
func (a *Accumulator) addFolds(ids []int64, y *mat.Dense, row func(dst []float64, i int)) {
	a.changed()
	k, n, d := len(a.folds), len(ids), a.folds[0].Dim()
	out := y.RawMatrix().Cols
	fold := make([]int, n)
	start := make([]int, k+1) // rows of fold f: start[f] to start[f+1]
	for i, id := range ids {
		fold[i] = FoldOf(id, k)
		start[fold[i]+1]++
	}
	for f := range k {
		start[f+1] += start[f]
	}
	if cap(a.scratch) < n*(d+out) {
		a.scratch = make([]float64, n*(d+out))
	}
	cat, ys := a.scratch[:n*d], a.scratch[n*d:n*(d+out)]
	next := slices.Clone(start[:k])
	for i := range n {
		r := next[fold[i]]
		next[fold[i]]++
		row(cat[r*d:(r+1)*d], i)
		copy(ys[r*out:(r+1)*out], y.RawRowView(i))
	}
	for f := range k {
		lo, hi := start[f], start[f+1]
		if lo == hi {
			continue
		}
		a.folds[f].addRows(blas64.General{Rows: hi - lo, Cols: d, Stride: d, Data: cat[lo*d : hi*d]},
			mat.NewDense(hi-lo, out, ys[lo*out:hi*out]))
	}
}

// needsIDs refuses rows without ids in an accumulator of several folds.
func (a *Accumulator) needsIDs() error {
	if len(a.folds) > 1 {
		return fmt.Errorf("accumulate: the statistics keep %d folds: add rows with their ids (AddFolds, AddProjectedFolds)", len(a.folds))
	}
	return nil
}

// changed marks the merged sums of several folds stale.
func (a *Accumulator) changed() {
	if len(a.folds) > 1 {
		a.stats = nil
	}
}

// sums returns the sums of all the rows: the one fold's, or the folds
// merged in fold order (a fixed order, so that equal folds give equal
// sums), kept until the folds change. The caller must not modify them.
func (a *Accumulator) sums() *Stats {
	if a.stats == nil {
		a.stats = mergeFolds(a.folds, -1)
	}
	return a.stats
}

// mergeFolds returns the folds but skip (−1: none) merged in fold order,
// or nil when there is none.
func mergeFolds(folds []*Stats, skip int) *Stats {
	var out *Stats
	for f, st := range folds {
		switch {
		case f == skip:
		case out == nil:
			out = st.Clone()
		default:
			if err := out.Merge(st); err != nil {
				panic(fmt.Sprintf("model: folds of one accumulator: %v", err)) // same shape by construction
			}
		}
	}
	return out
}

// withoutFoldInto returns the sums of the rows of total (all the folds
// merged, sums) that are not in fold, one of its folds: total less fold,
// each value the nearest float64 to the difference of the two
// double-doubles, so within a unit in the last place of the other folds
// merged (mergeFolds), for one pass over the sums instead of one a fold.
// The result has no residues (derived statistics, which a fit reads and
// nothing adds to); it is written into dst, such statistics of total's
// shape whose values are no longer needed, when not nil.
func withoutFoldInto(dst, total, fold *Stats) *Stats {
	if dst == nil {
		dst = total.emptyDerived()
	}
	dst.N = total.N - fold.N
	d := total.Dim()
	out, tr, fr := dst.S.RawSymmetric(), total.S.RawSymmetric(), fold.S.RawSymmetric()
	for i := 0; i < d; i++ {
		ddDiff(out.Data[i*out.Stride+i:i*out.Stride+d],
			tr.Data[i*tr.Stride+i:i*tr.Stride+d], total.res.s[i*tr.Stride+i:i*tr.Stride+d],
			fr.Data[i*fr.Stride+i:i*fr.Stride+d], fold.res.s[i*fr.Stride+i:i*fr.Stride+d])
	}
	ddDiff(dst.C.RawMatrix().Data, total.C.RawMatrix().Data, total.res.c, fold.C.RawMatrix().Data, fold.res.c)
	ddDiff(dst.YtY, total.YtY, total.res.yty, fold.YtY, fold.res.yty)
	ddDiff(dst.USum, total.USum, total.res.uSum, fold.USum, fold.res.uSum)
	ddDiff(dst.YSum, total.YSum, total.res.ySum, fold.YSum, fold.res.ySum)
	return dst
}

// errFewFolds reports cross-validation of rows that lie in one fold.
var errFewFolds = errors.New("cross-validation needs rows in at least two folds")
