//go:build !openblas

package blasimpl

import (
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/mvml/mvml/internal/asm/gemm"
)

func init() { blas64.Use(gemm.New()) }

// Name says which BLAS the program computes with: gonum's, and the
// micro-kernel of mvml's Dgemm where the processor has one.
func Name() string {
	if k := gemm.New().KernelName(); k != "" {
		return "gonum (pure Go) with mvml's " + k + " Dgemm"
	}
	return "gonum (pure Go)"
}
