//go:build !openblas

package model

// exactBLAS is set in the default build, whose pure-Go BLAS sums in the
// same order whatever the batches: the learned mode's fits repeat to the
// bit there. Under OpenBLAS the tests that use it compare them by their
// objective only.
const exactBLAS = true
