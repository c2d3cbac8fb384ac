//go:build !openblas && !noasm && !noasm_gemm

package blasimpl

import (
	"testing"

	"golang.org/x/sys/cpu"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/mvml/mvml/internal/asm/gemm"
)

// The default build computes with gonum's pure-Go BLAS and mvml's Dgemm,
// with the widest kernel the processor runs, and says so. Without the
// assembly (noasm, noasm_gemm) there is no kernel: gonum_noasm_test.go.
func TestUsesPureGoBLAS(t *testing.T) {
	impl, ok := blas64.Implementation().(gemm.Implementation)
	if !ok {
		t.Fatalf("blas64 computes with %T, want gemm.Implementation", blas64.Implementation())
	}
	var kernel string
	switch {
	case cpu.X86.HasAVX512F:
		kernel = "AVX-512"
	case cpu.X86.HasAVX2:
		kernel = "AVX2"
	}
	if impl.KernelName() != kernel {
		t.Errorf("Dgemm's kernel is %q, want %q", impl.KernelName(), kernel)
	}
	want := "gonum (pure Go)"
	if kernel != "" {
		want += " with mvml's " + kernel + " Dgemm"
	}
	if got := Name(); got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
}
