package ingest

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// exactDecimal is the exact fast path of decimal parsing (Clinger), shared
// by the CSV and the JSON decoders: when the digits form an integer
// mant ≤ 2^53 and the power of ten exp has |exp| ≤ 22, both are exact
// float64s and one multiplication or division rounds correctly, so the
// value equals strconv.ParseFloat's. It reports false otherwise, and the
// caller goes to strconv.
func exactDecimal(mant uint64, exp int, neg bool) (float64, bool) {
	if mant > 1<<53 || exp < -22 || exp > 22 {
		return 0, false
	}
	f := float64(mant)
	if exp < 0 {
		f /= pow10[-exp]
	} else {
		f *= pow10[exp]
	}
	if neg {
		f = -f
	}
	return f, true
}
