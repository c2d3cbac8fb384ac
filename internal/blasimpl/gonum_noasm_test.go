//go:build !openblas && (noasm || noasm_gemm)

package blasimpl

import (
	"testing"

	"gonum.org/v1/gonum/blas/blas64"

	"github.com/mvml/mvml/internal/asm/gemm"
)

// Without the assembly, Dgemm is gonum's whatever the processor, and the
// build says so.
func TestUsesGonumDgemmWithoutAssembly(t *testing.T) {
	impl, ok := blas64.Implementation().(gemm.Implementation)
	if !ok {
		t.Fatalf("blas64 computes with %T, want gemm.Implementation", blas64.Implementation())
	}
	if k := impl.KernelName(); k != "" {
		t.Errorf("Dgemm's kernel is %q under noasm, want none", k)
	}
	if got, want := Name(), "gonum (pure Go)"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
}
