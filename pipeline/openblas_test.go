//go:build openblas

package pipeline

// Under the tag openblas this package's tests and benchmarks compute on
// OpenBLAS, as the commands built with the tag do: make bench-score's
// in-process twin, BenchmarkScoreParquet, then measures the fast build.
import _ "github.com/mvml/mvml/internal/blasimpl"
