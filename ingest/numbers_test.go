package ingest

import (
	"math"
	"strconv"
	"testing"
)

// exactDecimal, which both the CSV and the JSON decoders use, gives
// strconv's value wherever it accepts, and refuses beyond its bounds.
func TestExactDecimal(t *testing.T) {
	for _, tc := range []struct {
		mant uint64
		exp  int
		neg  bool
		ok   bool
	}{
		{0, 0, false, true},
		{0, 0, true, true},
		{15, -1, false, true},
		{123456789, -22, true, true},
		{1 << 53, 22, false, true},
		{1 << 53, -22, false, true},
		{1<<53 + 1, 0, false, false},
		{1, 23, false, false},
		{1, -23, false, false},
		{math.MaxUint64, 0, false, false},
	} {
		got, ok := exactDecimal(tc.mant, tc.exp, tc.neg)
		if ok != tc.ok {
			t.Errorf("exactDecimal(%d, %d, %t) accepted %t, want %t", tc.mant, tc.exp, tc.neg, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		text := strconv.FormatUint(tc.mant, 10) + "e" + strconv.Itoa(tc.exp)
		if tc.neg {
			text = "-" + text
		}
		want, err := strconv.ParseFloat(text, 64)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("exactDecimal(%d, %d, %t) = %v, strconv gives %v (%v)", tc.mant, tc.exp, tc.neg, got, want, err)
		}
	}
}
