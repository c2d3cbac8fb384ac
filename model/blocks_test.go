package model

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// The block norms of a head's metric are symmetric, their squares add up
// to ‖Ã‖²_F, and each is the norm of its block; the sparse penalty's group
// norms are made of the same blocks.
func TestBlockNorms(t *testing.T) {
	m, _ := trainedToy(t)
	a := m.Heads[0].A
	off := offsets(m.Features.Ranks())
	norms := m.BlockNorms(0)
	v := len(off) - 1
	if r, c := norms.Dims(); r != v || c != v {
		t.Fatalf("%d×%d norms for %d views", r, c, v)
	}
	var total float64
	for l := range v {
		for k := range v {
			block := mat.NewDense(off[l+1]-off[l], off[k+1]-off[k], nil)
			for i := off[l]; i < off[l+1]; i++ {
				for j := off[k]; j < off[k+1]; j++ {
					block.Set(i-off[l], j-off[k], a.At(i, j))
				}
			}
			want := mat.Norm(block, 2)
			if got := norms.At(l, k); math.Abs(got-want) > 1e-12*want || math.Abs(got-norms.At(k, l)) > 1e-12*want {
				t.Errorf("block (%d,%d): norm %v, want %v (and (%d,%d) %v)", l, k, got, want, k, l, norms.At(k, l))
			}
			total += norms.At(l, k) * norms.At(l, k)
		}
	}
	if f := mat.Norm(a, 2); math.Abs(total-f*f) > 1e-10*f*f {
		t.Errorf("block norms add up to %v, ‖Ã‖²_F is %v", total, f*f)
	}
	s := &solver{off: off}
	if g, want := s.groupNorm(a, 0, 1), math.Sqrt(2)*norms.At(0, 1); math.Abs(g-want) > 1e-12*want {
		t.Errorf("group norm of views 0 and 1 %v, want √2·‖Ã_01‖_F = %v", g, want)
	}
}
