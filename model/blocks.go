package model

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// BlockNorms is the v×v table of the Frobenius norms ‖Ã_lm‖_F of the
// view-pair blocks of head h's metric: how strongly it couples view l
// with view m, the view interactions the paper reads off Ã.
func (m *Model) BlockNorms(h int) *mat.Dense {
	off := offsets(m.Features.Ranks())
	v := len(off) - 1
	norms := mat.NewDense(v, v, nil)
	for l := range v {
		for k := range v {
			norms.Set(l, k, math.Sqrt(blockSqNorm(m.Heads[h].A, off, l, k)))
		}
	}
	return norms
}

// blockSqNorm is ‖a_lm‖²_F, the squared Frobenius norm of the block of a
// whose rows are off[l]:off[l+1] and columns off[m]:off[m+1].
func blockSqNorm(a *mat.SymDense, off []int, l, m int) float64 {
	ss := 0.0
	for i := off[l]; i < off[l+1]; i++ {
		for j := off[m]; j < off[m+1]; j++ {
			v := a.At(i, j)
			ss += v * v
		}
	}
	return ss
}
