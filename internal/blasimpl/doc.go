// Package blasimpl chooses the BLAS behind gonum for mvml's commands.
//
// gonum's blas64 (and through it gonum's mat and its pure-Go LAPACK) calls
// one process-wide implementation, set by blas64.Use. That setting is
// gonum's own global state, so no library package of mvml touches it: the
// commands import this package, whose initialisation makes the choice once,
// before main runs.
//
// The default build leaves gonum's pure-Go BLAS in place and needs no cgo.
// Built with the tag openblas (go build -tags openblas, make build-openblas)
// it links the machine's OpenBLAS through cgo and gonum's netlib bindings;
// on Debian and Ubuntu the library comes with the package libopenblas-dev.
// The same tag has package transform evaluate the Gaussian kernel's exp
// four lanes at a time, which is most of that kernel's time once OpenBLAS
// computes its products. Results agree with the default build's to 1e-10,
// not bit for bit; the default build's stay what they were.
// OpenBLAS runs its own threads: OPENBLAS_NUM_THREADS bounds them as usual.
package blasimpl
