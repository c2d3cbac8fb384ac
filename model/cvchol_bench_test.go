package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

func BenchmarkCholCV(b *testing.B) {
	const n = 321
	a := randomSPD(rand.New(rand.NewPCG(12, 2)), n).RawSymmetric()
	m := blas64.Symmetric{N: n, Stride: n, Uplo: blas.Upper, Data: make([]float64, n*n)}
	b.Run("lapack", func(b *testing.B) {
		cpu := cpuSeconds()
		for b.Loop() {
			copy(m.Data, a.Data)
			lapack64.Potrf(m)
		}
		b.ReportMetric((cpuSeconds()-cpu)*1e6/float64(b.N), "cpu-us/op")
	})
	b.Run("potrfUpper", func(b *testing.B) {
		cpu := cpuSeconds()
		for b.Loop() {
			copy(m.Data, a.Data)
			potrfUpper(m)
		}
		b.ReportMetric((cpuSeconds()-cpu)*1e6/float64(b.N), "cpu-us/op")
	})
	for _, nb := range []int{8, 16, 24, 32, 48} {
		b.Run(fmt.Sprint("cholCV", nb), func(b *testing.B) {
			cpu := cpuSeconds()
			for b.Loop() {
				copy(m.Data, a.Data)
				cholCVBlocked(m, nb)
			}
			b.ReportMetric((cpuSeconds()-cpu)*1e6/float64(b.N), "cpu-us/op")
		})
	}
}

// BenchmarkCholSolveRows solves for 8 right-hand sides with a factor of
// order 321 (cholCV's, its transpose below the diagonal): the solves of
// one candidate's fold fit in BenchmarkTune.
func BenchmarkCholSolveRows(b *testing.B) {
	const n, k = 321, 8
	rng := rand.New(rand.NewPCG(12, 3))
	a := randomSPD(rng, n).RawSymmetric()
	m := blas64.Symmetric{N: n, Stride: n, Uplo: blas.Upper, Data: append([]float64(nil), a.Data...)}
	if !cholCV(m) {
		b.Fatal("not positive definite")
	}
	rhs := make([]float64, k*n)
	for i := range rhs {
		rhs[i] = rng.NormFloat64()
	}
	x := blas64.General{Rows: k, Cols: n, Stride: n, Data: make([]float64, k*n)}
	u := blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: n, Stride: n, Data: m.Data}
	for b.Loop() {
		copy(x.Data, rhs)
		cholSolveRowsL(u, x)
	}
}
