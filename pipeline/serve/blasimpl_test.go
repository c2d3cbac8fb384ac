package serve

// This package's tests and benchmarks compute with the BLAS the commands
// choose (internal/blasimpl): in the default build gonum's with mvml's
// assembly Dgemm, bit for bit gonum's alone; under the tag openblas,
// OpenBLAS, so that the benchmarks measure what `mvml serve` and
// `mvml refit` run.
import _ "github.com/mvml/mvml/internal/blasimpl"
