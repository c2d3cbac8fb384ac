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
