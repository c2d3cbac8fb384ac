// Package blasimpl chooses the BLAS behind gonum for mvml's commands.
//
// gonum's blas64 (and through it gonum's mat and its pure-Go LAPACK) calls
// one process-wide implementation, set by blas64.Use. That setting is
// gonum's own global state, so no library package of mvml touches it: the
// commands import this package, whose initialisation makes the choice once,
// before main runs.
//
// The default build computes with gonum's pure-Go BLAS and needs no cgo,
// but for Dgemm: package gemm replaces it with packed panels and an
// assembly micro-kernel (AVX-512 where the processor has it, else AVX2,
// else gonum's own), 6–8 times as fast, which computes every element of C
// with the same rounded products and adds in the same order as gonum's, so
// that every result stays what gonum alone gives, to the bit. A·Bᵀ (dot
// products in gonum) and small products remain gonum's.
// Built with the tag openblas (go build -tags openblas, make build-openblas)
// it links the machine's OpenBLAS through cgo and gonum's netlib bindings;
// on Debian and Ubuntu the library comes with the package libopenblas-dev.
// Where the processor runs mvml's AVX-512 Dgemm kernel and OpenBLAS has no
// AVX-512 kernel of its own for it (OpenBLAS 0.3.21 runs its Haswell ones
// on AMD's Zen 5), that build keeps mvml's for the products it takes,
// faster there than OpenBLAS's dgemm, and OpenBLAS computes the rest
// (Dsyrk, the triangular solves, A·Bᵀ, ...).
// Results agree with the default build's to 1e-10, not bit for bit.
// OpenBLAS runs its own threads: OPENBLAS_NUM_THREADS bounds them as usual.
package blasimpl
