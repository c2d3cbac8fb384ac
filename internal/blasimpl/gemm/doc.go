// Package gemm is gonum's pure-Go BLAS with a faster Dgemm that computes
// every bit of C as gonum's does: packed panels and assembly micro-kernels
// (AVX-512 where the processor has it, else AVX2, else gonum's own Dgemm).
//
// It holds no cgo, so that it can hold Go assembly: package blasimpl, which
// links OpenBLAS through cgo under the tag openblas, chooses it in the
// default build, and the openblas build's benchmarks compare the two.
package gemm
