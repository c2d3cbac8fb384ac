package ingest

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
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

// Every entry of the power-of-ten table is floor(10^e × 2^(128-E)) with
// E = pow10Exp2(e), and has its top bit set (which checks E).
func TestPow10Table(t *testing.T) {
	if len(pow10Mant) != pow10MaxExp10-pow10MinExp10+1 {
		t.Fatalf("%d entries for exponents %d..%d", len(pow10Mant), pow10MinExp10, pow10MaxExp10)
	}
	ten := big.NewInt(10)
	for e := pow10MinExp10; e <= pow10MaxExp10; e++ {
		r := new(big.Rat).SetInt(new(big.Int).Exp(ten, big.NewInt(int64(max(e, -e))), nil))
		if e < 0 {
			r.Inv(r)
		}
		shift := 128 - pow10Exp2(e)
		scale := new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(max(shift, -shift))))
		if shift < 0 {
			scale.Inv(scale)
		}
		r.Mul(r, scale)
		want := new(big.Int).Quo(r.Num(), r.Denom())
		got := new(big.Int).Lsh(new(big.Int).SetUint64(pow10Mant[e-pow10MinExp10][0]), 64)
		got.Or(got, new(big.Int).SetUint64(pow10Mant[e-pow10MinExp10][1]))
		if got.Cmp(want) != 0 || got.BitLen() != 128 {
			t.Errorf("1e%d: table %#x, want %#x (%d bits)", e, got, want, want.BitLen())
		}
	}
}

// decimalCases are texts where a conversion can go wrong: halfway cases
// (decided by ties to even, or by a digit far beyond the 17th), the edges
// of the subnormals and of overflow, the ends of the power-of-ten table,
// more digits than a uint64 holds, signed zeros.
var decimalCases = []string{
	"0", "-0", "0.0", "-0.0e5", "0e-999", "0.000", "1", "-1", "0.1", "0.2", "0.3", "0.30000000000000004",
	"1.7976931348623157e308", "-1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308",
	"179769313486231580793728971405301e276", "1e308", "1e309", "1e-307", "1e-308", "1e-323", "1e-324",
	"2.2250738585072014e-308", "2.2250738585072011e-308", "2.2250738585072012e-308", "2.225073858507201136057409796709131975934819546351645648e-308",
	"4.9406564584124654e-324", "5e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "3e-324",
	"1e-348", "1e-349", "1e347", "1e348", "9999999999999999999e-348", "1e-342", "123456789e-350",
	"9007199254740992", "9007199254740993", "9007199254740994", "9007199254740995", "9007199254740993.000000000000001",
	"9007199254740992.999999999999999", "18014398509481985", "18014398509481987",
	"1.00000000000000011102230246251565404236316680908203125", // 1 + 2^-53: a tie, down to even
	"1.00000000000000011102230246251565404236316680908203124", // below it
	"1.00000000000000011102230246251565404236316680908203126", // above it
	"1.000000000000000111022302462515654042363166809082031250000000001",
	"1.00000000000000033306690738754696212708950042724609375", // 1 + 3·2^-53: a tie, up to even
	"7.2057594037927933e16", "72057594037927933", "72057594037927932", "72057594037927940",
	"1234567890123456789", "12345678901234567890", "123456789012345678901234567890", "9999999999999999999", "10000000000000000000",
	"0.12345678901234567890123", "1.2345678901234567e-300", "8.988465674311579e307",
	"1e22", "1e23", "1e-22", "1e-23", "123456789e-22", "4.35", "17.4999999999999982236431605997495353221893310546875",
	"0.000000000000000000000000000001", "100000000000000000000000000000000000000000e-40",
	"0.1e1", "1.e5", "1e+5", "1E5", "-.5", "+.5", "00000000000000000000000001", "0.00000000000000000000123456789012345678901",
	"1e999999999999", "1e-999999999999", "-1e999999", "0e999999999",
}

// Both decoders give strconv's value, bit for bit, on every decimal case.
func TestDecimalCasesMatchStrconv(t *testing.T) {
	for _, text := range decimalCases {
		checkAgainstStrconv(t, text)
	}
}

// Shortest round-trip float64 text, the form every JSON encoder writes,
// converts without strconv: the fast path takes 16–17 digits, and the
// exact values of fixed-point sensors.
func TestDecimalTakesShortestFloat64Text(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value func(*rand.Rand) float64
	}{
		{"standard normal", func(rng *rand.Rand) float64 { return rng.NormFloat64() }},
		{"normal × 10^±30", func(rng *rand.Rand) float64 { return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(61)-30)) }},
		{"any bits", func(rng *rand.Rand) float64 {
			v := math.Float64frombits(rng.Uint64())
			if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) < 0x1p-1022 {
				return 1 // strconv decides subnormals and ties: not a property of the fast path
			}
			return v
		}},
		{"k/2^16", func(rng *rand.Rand) float64 { return float64(rng.IntN(1<<24)-1<<23) / (1 << 16) }},
		{"k/2^24", func(rng *rand.Rand) float64 { return float64(rng.IntN(1<<30)-1<<29) / (1 << 24) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			declined := 0
			const n = 20_000
			for range n {
				text := strconv.FormatFloat(tc.value(rng), 'g', -1, 64)
				if _, ok := parseDecimal([]byte(text)); !ok {
					declined++
					if declined <= 3 {
						t.Errorf("%s declined", text)
					}
				}
				checkAgainstStrconv(t, text)
			}
			if declined > 0 {
				t.Errorf("%d of %d declined", declined, n)
			}
		})
	}
}

// Exact midpoints between neighbouring float64s, and decimals just above
// and below them, written out in full (up to 767 significant digits): the
// ties round to even, the others away from the midpoint.
func TestDecimalHalfwayCases(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 1000 {
		var v float64
		switch i % 3 {
		case 0: // normal
			v = math.Float64frombits(rng.Uint64() &^ (1 << 63))
			if math.IsInf(v, 0) || math.IsNaN(v) {
				continue
			}
		case 1: // subnormal
			v = math.Float64frombits(rng.Uint64N(1 << 52))
		default: // of ordinary magnitude
			v = math.Abs(rng.NormFloat64())
		}
		next := math.Nextafter(v, math.Inf(1))
		if math.IsInf(next, 0) {
			continue
		}
		mid := new(big.Float).SetPrec(200).SetFloat64(v)
		mid.Add(mid, new(big.Float).SetPrec(200).SetFloat64(next))
		mid.Quo(mid, big.NewFloat(2))
		exact := mid.Text('e', 800)
		mant, exp, _ := strings.Cut(exact, "e")
		mant = strings.TrimRight(mant, "0")
		for _, text := range []string{mant + "e" + exp, mant + "0000001e" + exp, lowerLast(mant) + "9999e" + exp} {
			checkAgainstStrconv(t, text)
			checkAgainstStrconv(t, "-"+text)
		}
	}
}

// lowerLast decrements the last digit of a decimal ending in a nonzero digit.
func lowerLast(s string) string {
	return s[:len(s)-1] + string(s[len(s)-1]-1)
}

// checkAgainstStrconv converts text with the CSV parser and, when it is
// JSON's syntax, the JSON scanner, and compares both to strconv.
func checkAgainstStrconv(t *testing.T, text string) {
	t.Helper()
	want, err := strconv.ParseFloat(text, 64)
	wantOK := err == nil || errors.Is(err, strconv.ErrRange)
	if got, ok := parseFloat([]byte(text)); ok != wantOK || ok && math.Float64bits(got) != math.Float64bits(want) {
		t.Errorf("CSV %s: %v (%t), strconv gives %v (%v)", text, got, ok, want, err)
	}
	if !jsonNumber.MatchString(text) {
		return
	}
	var s jsonScanner
	s.reset([]byte(text))
	got, overflow, bad := s.readFloat()
	switch {
	case bad != nil:
		t.Errorf("JSON %s: %s", text, bad.reason)
	case overflow != (err != nil):
		t.Errorf("JSON %s: overflow %t, strconv says %v", text, overflow, err)
	case s.pos != len(text):
		t.Errorf("JSON %s: read %d bytes", text, s.pos)
	case math.Float64bits(got) != math.Float64bits(want):
		t.Errorf("JSON %s: %v, strconv gives %v", text, got, want)
	}
}

// jsonNumber is the grammar of a JSON number (RFC 8259).
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// jsonNumberish is what the JSON scanner consumes before it can tell
// whether a number is well formed.
var jsonNumberish = regexp.MustCompile(`^-?(0|[1-9][0-9]*)?(\.[0-9]*)?([eE][+-]?[0-9]*)?`)

// FuzzReadFloat feeds the JSON scanner arbitrary bytes: it reads a number
// exactly when they start with one, consumes just that number, and gives
// strconv's value for it bit for bit.
func FuzzReadFloat(f *testing.F) {
	for _, text := range decimalCases {
		f.Add(text)
	}
	for _, text := range []string{"-", "01", "1.", "1.e5", "1e", "1e+", "-x", ".5", "1.5,", "2]", "1e5e5", "0.12345678901234567,0.5"} {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, data string) {
		var s jsonScanner
		s.reset([]byte(data))
		got, overflow, bad := s.readFloat()
		tok := s.data[:s.pos]
		prefix := jsonNumberish.FindString(data)
		if !jsonNumber.MatchString(prefix) {
			if bad == nil {
				t.Fatalf("%q: read %q, which is not a JSON number", data, tok)
			}
			return
		}
		if bad != nil {
			t.Fatalf("%q: %s, but it starts with the number %q", data, bad.reason, prefix)
		}
		if string(tok) != prefix || s.pos != len(prefix) {
			t.Fatalf("%q: read %q (%d bytes), want %q", data, tok, s.pos, prefix)
		}
		want, err := strconv.ParseFloat(prefix, 64)
		if overflow != (err != nil) || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%q: %v (overflow %t), strconv gives %v (%v)", prefix, got, overflow, want, err)
		}
	})
}

// FuzzFloatText writes float64s (any bit pattern: subnormals, ±0, the
// largest) as encoders do — shortest round trip, 17 significant digits,
// fixed point, a given precision — and reads them back with both decoders.
func FuzzFloatText(f *testing.F) {
	for _, v := range []float64{0, math.Copysign(0, -1), 1, 0.1, math.MaxFloat64, math.SmallestNonzeroFloat64, 2.2250738585072014e-308, 9007199254740993, 1.2345678901234567e-5} {
		f.Add(math.Float64bits(v), uint8(0), int8(-1))
	}
	f.Add(uint64(0x7fefffffffffffff), uint8(2), int8(20))
	f.Add(uint64(0x000fffffffffffff), uint8(3), int8(40))
	f.Fuzz(func(t *testing.T, bits uint64, form uint8, prec int8) {
		v := math.Float64frombits(bits)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		var text string
		switch form % 4 {
		case 0:
			text = strconv.FormatFloat(v, 'g', -1, 64)
		case 1:
			text = strconv.FormatFloat(v, 'e', 16, 64)
		case 2:
			text = strconv.FormatFloat(v, 'f', -1, 64)
		default:
			text = strconv.FormatFloat(v, 'e', int(prec)&63, 64)
		}
		checkAgainstStrconv(t, text)
	})
}
