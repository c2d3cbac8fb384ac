//go:build openblas

package refit

// exactStats says whether merged statistics are exact in this build:
// under -tags openblas, OpenBLAS's Dsyrk sums them without residues
// (model/gram_openblas.go).
const exactStats = false
