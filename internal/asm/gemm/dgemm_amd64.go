//go:build amd64 && !noasm && !noasm_gemm

package gemm

import "golang.org/x/sys/cpu"

//go:generate go run gen_kernels.go

// The kernels of dgemm_kernels_amd64.s: each adds a packed panel of A
// times a strip of B (k steps, row stride ldb) to a tile of C at c, row
// stride ldc; xN is a strip of N registers, Skip leaves an element where
// tmp == 0.

//go:noescape
func kernelAVX512x1(k int, a, b *float64, ldb int, c *float64, ldc int)

//go:noescape
func kernelAVX512x1Skip(k int, a, b *float64, ldb int, c *float64, ldc int)

//go:noescape
func kernelAVX512x2(k int, a, b *float64, ldb int, c *float64, ldc int)

//go:noescape
func kernelAVX512x2Skip(k int, a, b *float64, ldb int, c *float64, ldc int)

//go:noescape
func kernelAVX512x3(k int, a, b *float64, ldb int, c *float64, ldc int)

//go:noescape
func kernelAVX512x3Skip(k int, a, b *float64, ldb int, c *float64, ldc int)

//go:noescape
func kernelAVX2x1(k int, a, b *float64, ldb int, c *float64, ldc int)

//go:noescape
func kernelAVX2x1Skip(k int, a, b *float64, ldb int, c *float64, ldc int)

//go:noescape
func kernelAVX2x2(k int, a, b *float64, ldb int, c *float64, ldc int)

//go:noescape
func kernelAVX2x2Skip(k int, a, b *float64, ldb int, c *float64, ldc int)

// packA8NoTransAVX512 packs tmp = alpha·a of rows a, a+lda, … a+7·lda,
// columns [0, k), as a panel at dst (8·roundup(k, 8) elements written) and
// says whether some tmp is zero.
//
//go:noescape
func packA8NoTransAVX512(k int, a *float64, lda int, alpha float64, dst *float64) (zero bool)

// packA8TransAVX512 packs tmp = alpha·a of the lanes of mask of a+l·lda
// for l in [0, k) (columns of A stored transposed), zeros in the others,
// as a panel at dst and says whether some tmp is zero.
//
//go:noescape
func packA8TransAVX512(k int, a *float64, lda int, mask int, alpha float64, dst *float64) (zero bool)

// avx512 is an 8×24 tile in 24 zmm registers.
var avx512 = &microKernel{
	name: "AVX-512", rows: 8, lanes: 8,
	kernels:     []kernelFunc{kernelAVX512x1, kernelAVX512x2, kernelAVX512x3},
	skips:       []kernelFunc{kernelAVX512x1Skip, kernelAVX512x2Skip, kernelAVX512x3Skip},
	packNoTrans: packA8NoTransAVX512,
	packTrans:   packA8TransAVX512,
}

// avx2 is a 4×8 tile in 8 ymm registers (16 in all, with the skip's masks).
var avx2 = &microKernel{
	name: "AVX2", rows: 4, lanes: 4,
	kernels: []kernelFunc{kernelAVX2x1, kernelAVX2x2},
	skips:   []kernelFunc{kernelAVX2x1Skip, kernelAVX2x2Skip},
}

// availableKernels are the kernels the processor and the OS support, the
// widest first.
func availableKernels() []*microKernel {
	var ks []*microKernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, avx512)
	}
	if cpu.X86.HasAVX2 {
		ks = append(ks, avx2)
	}
	return ks
}
