//go:build !openblas

package blasimpl

// Name says which BLAS the program computes with.
func Name() string { return "gonum (pure Go)" }
