//go:build openblas

package blasimpl

/*
#cgo LDFLAGS: -lopenblas
char *openblas_get_config(void);
char *openblas_get_corename(void);
void openblas_set_num_threads(int);
*/
import "C"

import (
	"os"
	"strings"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/netlib/blas/netlib"

	mvmlgemm "github.com/mvml/mvml/internal/asm/gemm"
)

func init() {
	blas64.Use(build())
	// mvml spreads its products over GOMAXPROCS goroutines already (blocks
	// of rows, one-vs-all heads); OpenBLAS threads on top of those fight
	// them for the same cores, and on the 64-row blocks of a kernel product
	// its threading alone halved the speed of one call. One OpenBLAS thread
	// per call, unless the user sets the count OpenBLAS reads.
	if os.Getenv("OPENBLAS_NUM_THREADS") == "" && os.Getenv("GOTO_NUM_THREADS") == "" && os.Getenv("OMP_NUM_THREADS") == "" {
		C.openblas_set_num_threads(1)
	}
}

// build is the BLAS of this build: OpenBLAS, but for the products mvml's
// own Dgemm takes where the processor runs its AVX-512 kernel and OpenBLAS
// has none for it. There (a Zen 5 host, for which OpenBLAS 0.3.21 chooses
// its Haswell kernels) mvml's beat OpenBLAS's dgemm, one thread a call, on
// every shape of mvml's measured (BENCHMARKS.md, "One Dgemm call": 84.8
// against 63.5 GFLOP/s at 4096 × 64 × 128, 60.6 against 41.9 at 768³), and
// OpenBLAS made this build's scoring slower than the default build's.
// Where OpenBLAS runs AVX-512 kernels of its own, and against OpenBLAS on
// processors without AVX-512, mvml's kernels were not measured: OpenBLAS
// keeps those.
func build() blas.Float64 {
	if g := mvmlgemm.New(); g.Lanes() == 8 && !openBLASHasAVX512(coreName()) {
		return openBLASWithGemm{gemm: g}
	}
	return netlib.Implementation{}
}

// coreName is the processor core OpenBLAS chose its kernels for.
func coreName() string { return C.GoString(C.openblas_get_corename()) }

// openBLASHasAVX512 says whether OpenBLAS's kernels for its core (as
// openblas_get_corename names it) use AVX-512.
func openBLASHasAVX512(core string) bool {
	switch strings.ToLower(core) {
	case "skylakex", "cooperlake", "sapphirerapids":
		return true
	}
	return false
}

// openBLASWithGemm is OpenBLAS with mvml's Dgemm for the products its
// micro-kernel takes (gemm.Implementation.Takes); OpenBLAS computes the
// others and every other routine.
type openBLASWithGemm struct {
	netlib.Implementation
	gemm mvmlgemm.Implementation
}

func (o openBLASWithGemm) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if o.gemm.Takes(tA, tB, m, n, k, alpha, beta) {
		o.gemm.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	o.Implementation.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Name says which BLAS the program computes with, as the linked OpenBLAS
// describes its own build (version, kernel, threading), and mvml's Dgemm
// where it takes the products.
func Name() string {
	name := "OpenBLAS (" + C.GoString(C.openblas_get_config()) + ")"
	if o, ok := build().(openBLASWithGemm); ok {
		name += " with mvml's " + o.gemm.KernelName() + " Dgemm"
	}
	return name
}
