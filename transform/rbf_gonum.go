//go:build !amd64

package transform

// rbfRow is rbfRowGo: the default build keeps math.Exp, so that its kernel
// values stay bit for bit what they were.
func rbfRow(row, norms []float64, nx, gamma float64) { rbfRowGo(row, norms, nx, gamma) }
