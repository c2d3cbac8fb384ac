package eval

// This package's tests compute with the BLAS the commands choose
// (internal/blasimpl): in the default build gonum's with mvml's assembly
// Dgemm, bit for bit gonum's alone; under the tag openblas, OpenBLAS (make
// test-openblas).
import _ "github.com/mvml/mvml/internal/blasimpl"
