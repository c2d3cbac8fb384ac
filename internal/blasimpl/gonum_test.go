//go:build !openblas

package blasimpl

import (
	"testing"

	"gonum.org/v1/gonum/blas/blas64"
)

// The default build computes with gonum's pure-Go BLAS and mvml's Dgemm,
// with the widest kernel the processor runs, and says so.
func TestUsesPureGoBLAS(t *testing.T) {
	impl, ok := blas64.Implementation().(Implementation)
	if !ok {
		t.Fatalf("blas64 computes with %T, want blasimpl.Implementation", blas64.Implementation())
	}
	want := "gonum (pure Go)"
	if ks := availableKernels(); len(ks) > 0 {
		if impl.KernelName() != ks[0].name {
			t.Errorf("Dgemm's kernel is %q, want %q", impl.KernelName(), ks[0].name)
		}
		want += " with mvml's " + ks[0].name + " Dgemm"
	}
	if got := Name(); got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
}
