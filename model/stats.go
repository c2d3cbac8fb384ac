package model

import (
	"errors"
	"fmt"
	"slices"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/internal/asm/dd"
)

// Stats are the sufficient statistics of labelled rows for a fit:
// S = UᵀU and C = UᵀY with U = [U_1 … U_v] the concatenated per-view
// features (n×D, D = Σ r_l) and Y the n×k targets, YtY_j = y_jᵀy_j and the
// (possibly decayed) row count N. Sums over rows, they add up across
// batches and partitions to the same numbers whatever the order and the
// grouping of the rows: every sum is kept as a double-double, the value in
// the exported field (the nearest float64 to the sum) plus a residue
// (see residue), so that statistics merged from replicas holding any
// subsets of the rows, in any order, round to those of one pass over them.
// A merged refit is then the one pass's model bit for bit, of the same
// version. (The learned metric needed it more when it started from
// blockdiag(S_ll), of condition 1e9 on Nyström features: one unit in the
// last place of one element of S moved its decisions by 2e-4 after five
// outer iterations; from learnedStart's metric they move by less than
// 1e-6, TestLearnedFitIgnoresLastBitsOfStats.)
type Stats struct {
	// Ranks are the per-view feature dimensions r_l; they fix the blocks.
	Ranks []int
	// N is the number of rows accumulated (a real number once decayed).
	N float64
	// S is UᵀU (D×D).
	S *mat.SymDense
	// C is UᵀY (D×k).
	C *mat.Dense
	// YtY holds yᵀy for each of the k target columns.
	YtY []float64
	// USum and YSum are the column sums of U and Y, for the intercept.
	USum []float64
	YSum []float64

	// res holds the residues of the sums; nil in derived statistics (the
	// centred ones a fit reads), which are never added to.
	res     *residue
	scratch []float64 // n×D concatenation buffer reused across Add calls
}

// residue is what the rounded sums of Stats leave out: every sum is
// hi + lo with hi the exported value and lo here, laid out as hi (S's
// lower triangle unused). The rows' products are rounded one by one as
// before; each addition's rounding error is caught exactly (addTerm) and
// summed into lo, and after every batch and merge hi takes the nearest
// float64 to hi + lo. Two passes over the same rows in different orders
// then differ by about n·ε² of the terms' magnitude, far below half a
// unit in the last place of hi, so hi comes out the same unless the sum
// lies within that distance of a rounding boundary (probability ~1e-12
// per element). N, a count of rows, is exact as it is until decayed.
// Under -tags openblas, OpenBLAS sums S without residues (gram_openblas.go).
type residue struct {
	s, c, yty, uSum, ySum []float64
}

// NewStats returns empty statistics for views of the given feature ranks
// and k target columns.
func NewStats(ranks []int, k int) *Stats {
	d := sum(ranks)
	if d == 0 || k <= 0 {
		panic("model: NewStats needs a positive dimension and target count")
	}
	return &Stats{
		Ranks: slices.Clone(ranks),
		S:     mat.NewSymDense(d, nil),
		C:     mat.NewDense(d, k, nil),
		YtY:   make([]float64, k),
		USum:  make([]float64, d),
		YSum:  make([]float64, k),
		res: &residue{s: make([]float64, d*d), c: make([]float64, d*k),
			yty: make([]float64, k), uSum: make([]float64, d), ySum: make([]float64, k)},
	}
}

// Dim is D, the total feature dimension.
func (s *Stats) Dim() int { return s.S.SymmetricDim() }

// Outputs is k, the number of target columns.
func (s *Stats) Outputs() int { _, k := s.C.Dims(); return k }

// Add accumulates rows: u[l] is the n×r_l feature block of view l and y the
// n×k targets of the same rows.
func (s *Stats) Add(u []*mat.Dense, y *mat.Dense) error {
	if len(u) != len(s.Ranks) {
		return fmt.Errorf("stats: %d feature blocks, want %d views", len(u), len(s.Ranks))
	}
	n, k := y.Dims()
	if k != s.Outputs() {
		return fmt.Errorf("stats: %d target columns, want %d", k, s.Outputs())
	}
	if n == 0 {
		return nil
	}
	d := s.Dim()
	if cap(s.scratch) < n*d {
		s.scratch = make([]float64, n*d)
	}
	cat := blas64.General{Rows: n, Cols: d, Stride: d, Data: s.scratch[:n*d]}
	off := 0
	for l, ul := range u {
		r, c := ul.Dims()
		if r != n || c != s.Ranks[l] {
			return fmt.Errorf("stats: view %d block is %d×%d, want %d×%d", l, r, c, n, s.Ranks[l])
		}
		raw := ul.RawMatrix()
		for i := 0; i < n; i++ {
			copy(cat.Data[i*d+off:i*d+off+c], raw.Data[i*raw.Stride:i*raw.Stride+c])
		}
		off += c
	}
	s.addRows(cat, y)
	return nil
}

// addRows adds the rows of cat (n×D) with their targets y (n×k).
func (s *Stats) addRows(cat blas64.General, y *mat.Dense) {
	n, d, k := cat.Rows, cat.Cols, s.Outputs()
	// S += catᵀcat (its upper triangle) and C += catᵀY.
	addCross(s.S.RawSymmetric(), s.res.s, s.C.RawMatrix(), s.res.c, cat, y.RawMatrix())
	yr := y.RawMatrix()
	for i := 0; i < n; i++ {
		row := yr.Data[i*yr.Stride : i*yr.Stride+k]
		for j, v := range row {
			s.YtY[j], s.res.yty[j] = addTerm(s.YtY[j], s.res.yty[j], float64(v*v))
			s.YSum[j], s.res.ySum[j] = addTerm(s.YSum[j], s.res.ySum[j], v)
		}
		dd.Axpy(1, cat.Data[i*cat.Stride:i*cat.Stride+d], s.USum, s.res.uSum)
	}
	s.N += float64(n)
	s.normalize()
}

// normalize makes every value the nearest float64 to value + residue.
func (s *Stats) normalize() {
	d := s.Dim()
	raw := s.S.RawSymmetric()
	for i := 0; i < d; i++ {
		renormalize(raw.Data[i*raw.Stride+i:i*raw.Stride+d], s.res.s[i*raw.Stride+i:i*raw.Stride+d])
	}
	renormalize(s.C.RawMatrix().Data, s.res.c)
	renormalize(s.YtY, s.res.yty)
	renormalize(s.USum, s.res.uSum)
	renormalize(s.YSum, s.res.ySum)
}

// Merge adds the statistics of other rows (another batch or partition) with
// the same ranks and outputs, residues included: the result is the sum
// of both sets of rows as one pass would give it.
func (s *Stats) Merge(o *Stats) error {
	if !slices.Equal(s.Ranks, o.Ranks) || s.Outputs() != o.Outputs() {
		return errors.New("stats: merging statistics of different shapes")
	}
	d := s.Dim()
	raw, oraw := s.S.RawSymmetric(), o.S.RawSymmetric()
	for i := 0; i < d; i++ {
		dd.Add(raw.Data[i*raw.Stride+i:i*raw.Stride+d], s.res.s[i*raw.Stride+i:i*raw.Stride+d],
			oraw.Data[i*oraw.Stride+i:i*oraw.Stride+d], o.res.s[i*oraw.Stride+i:i*oraw.Stride+d])
	}
	dd.Add(s.C.RawMatrix().Data, s.res.c, o.C.RawMatrix().Data, o.res.c)
	dd.Add(s.YtY, s.res.yty, o.YtY, o.res.yty)
	dd.Add(s.USum, s.res.uSum, o.USum, o.res.uSum)
	dd.Add(s.YSum, s.res.ySum, o.YSum, o.res.ySum)
	s.N += o.N
	return nil
}

// Scale multiplies every statistic by f in [0, 1]: exponential forgetting
// of older rows before new ones are added. Each value and its residue are
// scaled as one double-double.
func (s *Stats) Scale(f float64) {
	if !(f >= 0 && f <= 1) {
		panic(fmt.Sprintf("model: Stats.Scale factor %v outside [0,1]", f))
	}
	d := s.Dim()
	raw := s.S.RawSymmetric()
	for i := 0; i < d; i++ {
		ddScale(f, raw.Data[i*raw.Stride+i:i*raw.Stride+d], s.res.s[i*raw.Stride+i:i*raw.Stride+d])
	}
	ddScale(f, s.C.RawMatrix().Data, s.res.c)
	ddScale(f, s.YtY, s.res.yty)
	ddScale(f, s.USum, s.res.uSum)
	ddScale(f, s.YSum, s.res.ySum)
	s.N *= f
}

// Clone returns an independent copy.
func (s *Stats) Clone() *Stats {
	c := s.derived()
	if s.res != nil {
		c.res = &residue{s: slices.Clone(s.res.s), c: slices.Clone(s.res.c), yty: slices.Clone(s.res.yty),
			uSum: slices.Clone(s.res.uSum), ySum: slices.Clone(s.res.ySum)}
	}
	return c
}

// emptyDerived returns zero statistics of s's shape without residues,
// for derived ones to be written into.
func (s *Stats) emptyDerived() *Stats {
	d, k := s.Dim(), s.Outputs()
	return &Stats{Ranks: slices.Clone(s.Ranks), S: mat.NewSymDense(d, nil), C: mat.NewDense(d, k, nil),
		YtY: make([]float64, k), USum: make([]float64, d), YSum: make([]float64, k)}
}

// derived returns a copy of the values without their residues, for
// statistics computed from these (centred, in label units), which a fit
// reads and nothing adds to.
func (s *Stats) derived() *Stats {
	c := &Stats{Ranks: slices.Clone(s.Ranks), N: s.N, YtY: slices.Clone(s.YtY),
		USum: slices.Clone(s.USum), YSum: slices.Clone(s.YSum)}
	c.S = mat.NewSymDense(s.Dim(), nil)
	c.S.CopySym(s.S)
	c.C = mat.DenseCopyOf(s.C)
	return c
}

// centered returns the statistics of the rows with the column means of U
// and Y removed: S − nūūᵀ, C − nūȳᵀ, yᵀy − nȳ². Fitting them and adding
// the intercept ȳ − ūᵀg̃_w back is ridge with an unpenalised intercept.
// They are written into dst, derived statistics of s's shape whose values
// are no longer needed, when not nil.
func (s *Stats) centered(dst *Stats) *Stats {
	if dst == nil {
		dst = s.emptyDerived()
	}
	dst.N = s.N
	d := s.Dim()
	inv := 1 / s.N
	sr, cr := s.S.RawSymmetric(), s.C.RawMatrix()
	dr, dc := dst.S.RawSymmetric(), dst.C.RawMatrix()
	for i := 0; i < d; i++ {
		ui := inv * s.USum[i]
		src, out := sr.Data[i*sr.Stride:i*sr.Stride+d], dr.Data[i*dr.Stride:i*dr.Stride+d]
		for j := i; j < d; j++ {
			out[j] = src[j] - ui*s.USum[j]
		}
		crow, drow := cr.Data[i*cr.Stride:i*cr.Stride+cr.Cols], dc.Data[i*dc.Stride:i*dc.Stride+dc.Cols]
		for k, v := range s.YSum {
			drow[k] = crow[k] - ui*v
		}
	}
	for k, v := range s.YSum {
		dst.YtY[k] = s.YtY[k] - inv*v*v
	}
	clear(dst.USum)
	clear(dst.YSum)
	return dst
}

// offsets returns the first feature index of every view block.
func offsets(ranks []int) []int {
	off := make([]int, len(ranks)+1)
	for l, r := range ranks {
		off[l+1] = off[l] + r
	}
	return off
}

func sum(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}
