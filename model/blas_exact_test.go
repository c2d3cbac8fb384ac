//go:build !openblas

package model

// exactBLAS is set in the default build, whose pure-Go BLAS sums in the
// same order whatever the batches: the learned mode's fits, which carry
// rounding into their decisions (the Ã-step along Ã₀⁻¹G̃), repeat to the
// bit there. Under OpenBLAS they agree by their objective only.
const exactBLAS = true
