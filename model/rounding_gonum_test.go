//go:build !openblas

package model

// This package's tests compute with the BLAS the commands choose: in the
// default build gonum's with mvml's assembly Dgemm (internal/blasimpl),
// which computes every bit as gonum's alone.
import _ "github.com/mvml/mvml/internal/blasimpl"

// blasRounding is how far, relative to the scale of its terms, a result may
// be from the same computation done in another shape (a row alone rather
// than in a batch) or by another build: gonum's pure-Go Dgemm (and mvml's,
// bit for bit the same) sums every element in one order whatever the
// shapes, so not at all.
const blasRounding = 0
