//go:build openblas

package transform

import "testing"

// BenchmarkRBFRowOpenBLAS is the openblas build's rbfRow, its own exp
// within 2 units in the last place, beside BenchmarkRBFRow's exact kernels.
func BenchmarkRBFRowOpenBLAS(b *testing.B) { benchRBFRow(b, rbfRow) }
