//go:build !openblas

package refit

// exactStats says whether merged statistics are exact in this build: the
// default build sums them as double-doubles (model/gram_exact.go).
const exactStats = true
