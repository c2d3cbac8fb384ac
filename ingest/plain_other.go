//go:build !amd64

package ingest

// scanArray reads nothing on this processor: decodeArray reads every item
// with scanFloat (see plain_amd64.go).
func scanArray(data []byte, i int, dst []float64) (next, count int, closed bool) {
	return i, 0, false
}
