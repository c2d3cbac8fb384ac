//go:build openblas

package model

// exactBLAS: see blas_exact_test.go.
const exactBLAS = false
