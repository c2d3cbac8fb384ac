//go:build !amd64

package gemm

// availableKernels: mvml has micro-kernels for amd64 only; elsewhere
// gonum's Dgemm computes every product.
func availableKernels() []*microKernel { return nil }
