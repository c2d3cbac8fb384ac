//go:build !amd64 || noasm || noasm_gemm

package gemm

// availableKernels is empty without the assembly (other processors, or
// the tags noasm and noasm_gemm): gonum's Dgemm computes every product.
func availableKernels() []*microKernel { return nil }
