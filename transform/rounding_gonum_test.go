//go:build !openblas

package transform

// blasRounding is how far, relative to the scale of its terms, a result may
// be from the same computation done in another shape (a row alone rather
// than in a batch) or by another build: gonum's pure-Go Dgemm sums every
// element in one order whatever the shapes, so not at all.
const blasRounding = 0
