package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// The column-by-column products and solves equal gonum's whole-matrix
// ones to rounding, for one and for several columns, square and
// transposed, on sizes around the four-way unrolling.
func TestThinProductsMatchGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	randDense := func(r, c int) *mat.Dense {
		m := mat.NewDense(r, c, nil)
		for i := range m.RawMatrix().Data {
			m.RawMatrix().Data[i] = rng.NormFloat64()
		}
		return m
	}
	for _, n := range []int{1, 2, 3, 4, 5, 17, 100} {
		for _, k := range []int{1, 3, 20, 70} {
			t.Run(fmt.Sprintf("n=%d/k=%d", n, k), func(t *testing.T) {
				a, b := randDense(n, n), randDense(n, k)
				for _, trans := range []bool{false, true} {
					var got, want mat.Dense
					mulCols(&got, a, trans, b)
					if trans {
						want.Mul(a.T(), b)
					} else {
						want.Mul(a, b)
					}
					if d := relDiff(&got, &want); !(d <= 1e-13) {
						t.Errorf("mulCols (trans %v) differs from Mul by %g", trans, d)
					}
				}
				// A well-conditioned upper factor: unit-dominant diagonal.
				u := mat.NewTriDense(n, mat.Upper, nil)
				for i := 0; i < n; i++ {
					u.SetTri(i, i, float64(n)+rng.Float64())
					for j := i + 1; j < n; j++ {
						u.SetTri(i, j, rng.NormFloat64())
					}
				}
				l := mat.NewTriDense(n, mat.Lower, nil)
				l.Copy(u.T())
				if l.At(n-1, 0) != u.At(0, n-1) || l.At(0, 0) == 0 {
					t.Fatal("the lower triangle is not uᵀ")
				}
				for _, tri := range []*mat.TriDense{u, l} {
					for _, op := range []blas.Transpose{blas.NoTrans, blas.Trans} {
						for _, solve := range []bool{false, true} {
							got, want := mat.DenseCopyOf(b), mat.DenseCopyOf(b)
							triCols(tri.RawTriangular(), op, solve, got)
							if solve {
								blas64.Trsm(blas.Left, op, 1, tri.RawTriangular(), want.RawMatrix())
							} else {
								blas64.Trmm(blas.Left, op, 1, tri.RawTriangular(), want.RawMatrix())
							}
							if d := relDiff(got, want); !(d <= 1e-13) {
								t.Errorf("triCols (%c, op %c, solve %v) differs from gonum by %g", tri.RawTriangular().Uplo, op, solve, d)
							}
						}
					}
				}
				var got, want mat.Dense
				c := randDense(n, k)
				innerCols(&got, b, c)
				want.Mul(b.T(), c)
				if d := relDiff(&got, &want); !(d <= 1e-13) {
					t.Errorf("innerCols differs from Mul by %g", d)
				}
				dst, ref := randDense(n, n), &mat.Dense{}
				ref.CloneFrom(dst)
				addOuter(dst, 0.75, 0.5, b, c)
				var outer mat.Dense
				outer.Mul(b, c.T())
				outer.Scale(0.5, &outer)
				ref.Scale(0.75, ref)
				ref.Add(ref, &outer)
				if d := relDiff(dst, ref); !(d <= 1e-13) {
					t.Errorf("addOuter differs from Mul by %g", d)
				}
				sym, symRef := randomSPD(rng, n), mat.NewSymDense(n, nil)
				symRef.SymRankK(sym, 0.5, b)
				addSymOuter(sym, 0.5, b)
				if d := relDiff(sym, symRef); !(d <= 1e-13) {
					t.Errorf("addSymOuter differs from SymRankK by %g", d)
				}
			})
		}
	}
}

// solveTri solves every kind of triangular system as plain substitution
// does, to rounding, at every order up to 17 (the four-row blocks and
// their remainders), larger ones, and a stride past the order.
func TestSolveTriMatchesPlainSubstitution(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1))
	for _, n := range append(slicesRange(18), 31, 100, 433) {
		for _, uplo := range []blas.Uplo{blas.Upper, blas.Lower} {
			stride := n + 3
			tri := blas64.Triangular{Uplo: uplo, Diag: blas.NonUnit, N: n, Stride: stride, Data: make([]float64, max(n*stride, 1))}
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					if (uplo == blas.Upper) == (j >= i) {
						tri.Data[i*stride+j] = rng.NormFloat64() / math.Sqrt(float64(n))
					}
				}
				tri.Data[i*stride+i] = 1 + rng.Float64()
			}
			at := func(i, j int, op blas.Transpose) float64 {
				if op == blas.Trans {
					i, j = j, i
				}
				if (uplo == blas.Upper) != (j >= i) && i != j {
					return 0
				}
				return tri.Data[i*stride+j]
			}
			for _, op := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				b := make([]float64, n)
				for i := range b {
					b[i] = rng.NormFloat64()
				}
				// Plain substitution in the order op(t) is triangular in.
				want := slices.Clone(b)
				lowerOp := (uplo == blas.Lower) == (op == blas.NoTrans)
				for k := 0; k < n; k++ {
					i := k
					if !lowerOp {
						i = n - 1 - k
					}
					v := want[i]
					for j := 0; j < n; j++ {
						if j != i && at(i, j, op) != 0 {
							v -= at(i, j, op) * want[j]
						}
					}
					want[i] = v / at(i, i, op)
				}
				got := slices.Clone(b)
				solveTri(tri, op, got)
				for i := range got {
					if math.Abs(got[i]-want[i]) > 1e-12*(1+math.Abs(want[i])) {
						t.Fatalf("n = %d, %c, op %c: x[%d] = %v, plain substitution %v", n, uplo, op, i, got[i], want[i])
					}
				}
			}
		}
	}
}
