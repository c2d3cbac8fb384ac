//go:build !amd64

package transform

// rbfRow is rbfRowGo: the vector kernels that give math.Exp's bits are
// amd64's (rbf_amd64.s).
func rbfRow(row, norms []float64, nx, gamma float64) { rbfRowGo(row, norms, nx, gamma) }
