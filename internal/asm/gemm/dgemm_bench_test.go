package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// benchImpls are gonum's Dgemm and mvml's with each kernel this processor
// runs, as sub-benchmarks impl=… of one workload, so that their ratio is
// taken in one run (benchstat -col /impl).
func benchImpls(b *testing.B) []struct {
	name string
	impl blas.Float64
} {
	impls := []struct {
		name string
		impl blas.Float64
	}{{"impl=gonum", gonum.Implementation{}}}
	for _, mk := range availableKernels() {
		impls = append(impls, struct {
			name string
			impl blas.Float64
		}{"impl=mvml-" + mk.name, withKernel(mk)})
	}
	return impls
}

func randomSlice(rng *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = rng.NormFloat64()
	}
	return s
}

// BenchmarkDgemm is one Dgemm call on the shapes of mvml's products: the
// kernel of a block of rows against p landmarks (x·zᵀ, rows × d times the
// stored d × p zᵀ), the projection on the Nyström features (n×p times
// p×p), an Aᵀ·B of a fit's size and a square 512; GFLOP/s counts 2mnk.
func BenchmarkDgemm(b *testing.B) {
	shapes := []struct {
		name    string
		tA      blas.Transpose
		m, k, n int
	}{
		{"kernel-64x64x128", blas.NoTrans, 64, 64, 128},
		{"kernel-64x315x108", blas.NoTrans, 64, 315, 108},
		{"kernel-256x64x144", blas.NoTrans, 256, 64, 144},
		{"kernel-4096x64x128", blas.NoTrans, 4096, 64, 128},
		{"kernel-4096x315x144", blas.NoTrans, 4096, 315, 144},
		{"projection-4096x128x128", blas.NoTrans, 4096, 128, 128},
		{"TN-432x64x432", blas.Trans, 432, 64, 432},
		{"square-512", blas.NoTrans, 512, 512, 512},
	}
	for _, s := range shapes {
		rng := rand.New(rand.NewPCG(1, 1))
		a, bm, c := randomSlice(rng, s.m*s.k), randomSlice(rng, s.k*s.n), make([]float64, s.m*s.n)
		lda := s.k
		if s.tA == blas.Trans {
			lda = s.m
		}
		for _, im := range benchImpls(b) {
			b.Run(fmt.Sprintf("%s/%s", s.name, im.name), func(b *testing.B) {
				for b.Loop() {
					im.impl.Dgemm(s.tA, blas.NoTrans, s.m, s.n, s.k, 1, a, lda, bm, s.n, 0, c, s.n)
				}
				b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkDpotrf is gonum's LAPACK Cholesky factorisation at 432 (the
// heads' systems of a fit), whose blocked steps call Dgemm Aᵀ·B.
func BenchmarkDpotrf(b *testing.B) {
	const n = 432
	rng := rand.New(rand.NewPCG(2, 2))
	x := randomSlice(rng, n*n)
	spd := make([]float64, n*n)
	gonum.Implementation{}.Dgemm(blas.Trans, blas.NoTrans, n, n, n, 1, x, n, x, n, 0, spd, n)
	for i := range n {
		spd[i*n+i] += n
	}
	work := make([]float64, n*n)
	defer blas64.Use(blas64.Implementation())
	for _, im := range benchImpls(b) {
		b.Run(im.name, func(b *testing.B) {
			blas64.Use(im.impl)
			for b.Loop() {
				copy(work, spd)
				if _, ok := lapack64.Potrf(blas64.Symmetric{Uplo: blas.Upper, N: n, Stride: n, Data: work}); !ok {
					b.Fatal("not positive definite")
				}
			}
			b.ReportMetric(float64(n*n*n)/3*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
