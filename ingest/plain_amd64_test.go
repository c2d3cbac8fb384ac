package ingest

import (
	"math"
	"testing"
)

// scanArray reads the plain items and stops at the first other one, where
// decodeArray's scalar loop takes over: the tests that compare the two
// decoders would pass as well if it read nothing at all.
func TestScanArrayReads(t *testing.T) {
	if !hasScanArray {
		t.Skip("this processor has no AVX-512 VBMI2: scanArray reads nothing")
	}
	for _, tt := range []struct {
		items  string // from the first item on
		dst    int    // room in dst
		want   []float64
		next   int // where the next item starts (-1: past the ']' at the end)
		closed bool
	}{
		{`1.5,-0.25,3,0.7712394810290434]`, 8, []float64{1.5, -0.25, 3, 0.7712394810290434}, -1, true},
		{`12345678901234567,-0,0.000001]`, 8, []float64{12345678901234567, math.Copysign(0, -1), 0.000001}, -1, true},
		{`1, 2,  3]`, 8, []float64{1, 2, 3}, -1, true},
		{`1,2,3,4]`, 2, []float64{1, 2}, 4, false}, // dst full
		{`1,2e5,3]`, 8, []float64{1, 2e5, 3}, -1, true},
		{`1E-5,2.5e+3,-7e0,0e400,-0.0e-99]`, 8, []float64{1e-5, 2.5e+3, -7, 0, math.Copysign(0, -1)}, -1, true},
		{`1.7976931348623157e308,2.2250738585072014e-308,123456789e-30]`, 8, []float64{1.7976931348623157e308, 2.2250738585072014e-308, 123456789e-30}, -1, true},
		{`1,1e400,3]`, 8, []float64{1}, 2, false},                // too large: strconv's error
		{`1,4.9e-324,3]`, 8, []float64{1}, 2, false},             // not normal: strconv's
		{`1,1e-400,3]`, 8, []float64{1}, 2, false},               // beyond the table
		{`1,1e1000,3]`, 8, []float64{1}, 2, false},               // four digits of exponent
		{`1,1e,3]`, 8, []float64{1}, 2, false},                   // no digit after the letter
		{`1,1e+,3]`, 8, []float64{1}, 2, false},                  // nor after its sign
		{`1,1.e5,3]`, 8, []float64{1}, 2, false},                 // a point without a digit after it
		{`1,e5,3]`, 8, []float64{1}, 2, false},                   // no mantissa
		{`1,1e5.5,3]`, 8, []float64{1}, 2, false},                // a point in the exponent
		{`1,1e5e5,3]`, 8, []float64{1}, 2, false},                // two letters
		{`1,2 ,3]`, 8, []float64{1}, 2, false},                   // a space after a number
		{`1,02,3]`, 8, []float64{1}, 2, false},                   // a leading zero
		{`1,2.,3]`, 8, []float64{1}, 2, false},                   // a point without a digit after it
		{`1,.5,3]`, 8, []float64{1}, 2, false},                   // nor before it
		{`1,1.2.3,3]`, 8, []float64{1}, 2, false},                // two points
		{`1,"2",3]`, 8, []float64{1}, 2, false},                  // a string
		{`1,-,3]`, 8, []float64{1}, 2, false},                    // a sign alone
		{`1,12345678901234567890,3]`, 8, []float64{1}, 2, false}, // 20 digits
		{`1,1234567890123456789,3]`, 8, []float64{1, 1234567890123456789, 3}, -1, true},
		{`1,9007199254740993,3]`, 8, []float64{1}, 2, false}, // a tie above 2^53: strconv's
		{`1,2,3`, 8, []float64{1, 2}, 4, false},              // no ']' after the last
		{`0.5,0.25]`, 8, []float64{0.5, 0.25}, -1, true},     // Eisel–Lemire's ties below 2^53
	} {
		dst := make([]float64, tt.dst)
		if tt.next < 0 {
			tt.next = len(tt.items)
		}
		next, count, closed := scanArray([]byte(tt.items), 0, dst)
		if next != tt.next || closed != tt.closed || count != len(tt.want) {
			t.Errorf("%q: next %d, %d items, closed %v; want %d, %d, %v", tt.items, next, count, closed, tt.next, len(tt.want), tt.closed)
			continue
		}
		for j, w := range tt.want {
			if math.Float64bits(dst[j]) != math.Float64bits(w) {
				t.Errorf("%q: item %d is %v, want %v", tt.items, j, dst[j], w)
			}
		}
	}
}
