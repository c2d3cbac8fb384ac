package ingest

import "github.com/mvml/mvml/internal/asm/scan"

// The kernel indexes the table of powers of ten over scan's range, which
// must be pow10Mant's: either difference, if positive, fails to compile.
const (
	_ = uint(pow10MinExp10 - scan.MinExp10)
	_ = uint(scan.MinExp10 - pow10MinExp10)
	_ = uint(pow10MaxExp10 - scan.MaxExp10)
	_ = uint(scan.MaxExp10 - pow10MaxExp10)
)

// hasScanArray says whether scanArray reads anything: whether the build
// has scan's kernel and the processor runs it.
var hasScanArray = scan.Enabled

// scanArray reads the plain numbers of a JSON array from data[i] on into
// dst, with the vector scan (scan.Array) and ingest's tables of powers of
// ten. It stops at the first item that is not plain or whose value the
// scan does not decide; that item and the rest are the caller's, with
// scanFloat. Without the kernel it reads nothing.
func scanArray(data []byte, i int, dst []float64) (next, count int, closed bool) {
	return scan.Array(data, i, dst, &pow10, &pow10Mant[-pow10MinExp10])
}
