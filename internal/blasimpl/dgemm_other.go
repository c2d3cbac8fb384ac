//go:build !amd64 || openblas

package blasimpl

// availableKernels: mvml has micro-kernels for amd64 only, and none in the
// openblas build (a cgo package cannot hold Go assembly, and OpenBLAS
// computes its products); elsewhere gonum's Dgemm computes every product.
func availableKernels() []*microKernel { return nil }
