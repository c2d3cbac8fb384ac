//go:build !openblas

package blasimpl

import (
	"testing"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
)

// The default build computes with gonum's pure-Go BLAS and says so.
func TestUsesPureGoBLAS(t *testing.T) {
	if _, ok := blas64.Implementation().(gonum.Implementation); !ok {
		t.Errorf("blas64 computes with %T, want gonum.Implementation", blas64.Implementation())
	}
	if got, want := Name(), "gonum (pure Go)"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
}
