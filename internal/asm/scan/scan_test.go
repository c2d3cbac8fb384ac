package scan

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// The bit-exactness suite: every item Array reads holds strconv's bits for
// its text, and Array stops where an item starts. Without the kernel (the
// tag noasm, or a processor without AVX-512 VBMI2) it must read nothing.

// tables are the powers of ten Array is given: 10^0…10^22, and
// 10^MinExp10…10^MaxExp10 as 128-bit mantissas rounded down (as ingest's
// pow10gen writes them).
var tables = func() (t struct {
	pow10 [23]float64
	mant  [MaxExp10 - MinExp10 + 1][2]uint64
}) {
	for e := range t.pow10 {
		t.pow10[e] = math.Pow10(e)
	}
	mask := new(big.Int).SetUint64(^uint64(0))
	for e := MinExp10; e <= MaxExp10; e++ {
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(e, -e))), nil)
		m := new(big.Int)
		if l := p.BitLen(); e >= 0 && l >= 128 {
			m.Rsh(p, uint(l-128))
		} else if e >= 0 {
			m.Lsh(p, uint(128-l))
		} else {
			// 2^(127+l)/p lies in (2^127, 2^128): p is no power of two.
			m.Quo(new(big.Int).Lsh(big.NewInt(1), uint(127+l)), p)
		}
		t.mant[e-MinExp10] = [2]uint64{new(big.Int).Rsh(m, 64).Uint64(), new(big.Int).And(m, mask).Uint64()}
	}
	return t
}()

// scan runs Array on data from i with room for n items.
func scan(data []byte, i, n int) (vals []float64, next int, closed bool) {
	dst := make([]float64, n)
	next, count, closed := Array(data, i, dst, &tables.pow10, &tables.mant[-MinExp10])
	return dst[:count], next, closed
}

// plain reports whether s is a number as Array reads it: JSON's grammar,
// 19 digits at most, an exponent of three digits at most.
func plain(s string) bool {
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	mant = strings.TrimPrefix(mant, "-")
	whole, frac, hasPoint := strings.Cut(mant, ".")
	digits := func(d string) bool { return d != "" && strings.Trim(d, "0123456789") == "" }
	if !digits(whole) || hasPoint && !digits(frac) || len(whole) > 1 && whole[0] == '0' || len(whole)+len(frac) > 19 {
		return false
	}
	if hasExp {
		if exp != "" && (exp[0] == '+' || exp[0] == '-') {
			exp = exp[1:]
		}
		if !digits(exp) || len(exp) > 3 {
			return false
		}
	}
	return true
}

// checkScan fails t unless what Array read from data[i] is a prefix of its
// items, each plain, just before its separator and with strconv's bits,
// and next is where the item after them starts (before or after its
// spaces); or past the ']' when closed.
func checkScan(t *testing.T, data []byte, i, room int) (count int) {
	t.Helper()
	vals, next, closed := scan(data, i, room)
	if !Enabled && (len(vals) != 0 || next != i || closed) {
		t.Fatalf("%q: read %d items without the kernel", data[i:], len(vals))
	}
	if len(vals) > room {
		t.Fatalf("%q: %d items into room for %d", data[i:], len(vals), room)
	}
	pos, sep := i, byte(0)
	for k, v := range vals {
		for pos < len(data) && strings.IndexByte(" \t\n\r", data[pos]) >= 0 {
			pos++
		}
		end := pos
		for end < len(data) && data[end] != ',' && data[end] != ']' {
			end++
		}
		if end == len(data) {
			t.Fatalf("%q: item %d read without a separator after it", data[i:], k)
		}
		text := string(data[pos:end])
		if !plain(text) {
			t.Fatalf("%q: item %d, %q, is not a plain number", data[i:], k, text)
		}
		want, err := strconv.ParseFloat(text, 64)
		if err != nil || math.Float64bits(v) != math.Float64bits(want) {
			t.Fatalf("%q: item %d, %q: %v (%#x), strconv %v (%#x, %v)", data[i:], k, text, v, math.Float64bits(v), want, math.Float64bits(want), err)
		}
		pos, sep = end+1, data[end]
		if sep == ']' && k != len(vals)-1 {
			t.Fatalf("%q: read item %d past the array's ']'", data[i:], k+1)
		}
	}
	if closed != (sep == ']') {
		t.Fatalf("%q: closed %v after %d items", data[i:], closed, len(vals))
	}
	if len(vals) > 0 && !closed {
		after := pos
		for after < len(data) && strings.IndexByte(" \t\n\r", data[after]) >= 0 {
			after++
		}
		if next < pos || next > after {
			t.Fatalf("%q: next %d after %d items, want %d to %d", data[i:], next, len(vals), pos, after)
		}
	} else if len(vals) > 0 && next != pos {
		t.Fatalf("%q: next %d past the ']', want %d", data[i:], next, pos)
	}
	return len(vals)
}

// arrays are the items of arrays from their first on: plain numbers of
// every shape, and the items Array must leave to its caller.
var arrays = []string{
	`1.5,-0.25,3,0.7712394810290434]`, `12345678901234567,-0,0.000001]`, `1, 2,  3]`, `1,2,3,4]`,
	`1,2e5,3]`, `1E-5,2.5e+3,-7e0,0e400,-0.0e-99]`,
	`1.7976931348623157e308,2.2250738585072014e-308,123456789e-30]`,
	`1,1e400,3]`, `1,4.9e-324,3]`, `1,1e-400,3]`, `1,1e1000,3]`, `1,1e,3]`, `1,1e+,3]`, `1,1.e5,3]`,
	`1,e5,3]`, `1,1e5.5,3]`, `1,1e5e5,3]`, `1,2 ,3]`, `1,02,3]`, `1,2.,3]`, `1,.5,3]`, `1,1.2.3,3]`,
	`1,"2",3]`, `1,-,3]`, `1,12345678901234567890,3]`, `1,1234567890123456789,3]`,
	`1,9007199254740993,3]`, `1,2,3`, `0.5,0.25]`, `0.1,0.2,0.30000000000000004,-0.7712394810290434]`,
	`0.0000152587890625,0.5,0.25,0.75]`, "1,\t2,\n3,\r4]", `]`, `,]`, `1,,3]`,
	`1.2345678901234567,12345678901234567,-0.012345678901234567,9.999999999999999]`,
}

// ordinary are arrays whose every item the kernel reads.
var ordinary = []string{
	`1.5,-0.25,3,0.7712394810290434]`, `1, 2,  3]`, `1E-5,2.5e+3,-7e0,0e400,-0.0e-99]`,
	`0.1,0.2,0.30000000000000004,-0.7712394810290434]`, `0.5,0.25]`,
}

func TestArrayMatchesStrconv(t *testing.T) {
	for _, a := range arrays {
		for _, room := range []int{0, 1, 2, 8} {
			for _, lead := range []string{"", "[", "[ "} {
				checkScan(t, []byte(lead+a), len(lead), room)
			}
		}
	}
}

func TestArrayReadsOrdinaryArrays(t *testing.T) {
	if !Enabled {
		t.Skip("no scan kernel in this build or on this processor: Array reads nothing")
	}
	for _, a := range ordinary {
		if got, want := checkScan(t, []byte(a), 0, 8), strings.Count(a, ",")+1; got != want {
			t.Errorf("%q: read %d items, want %d", a, got, want)
		}
	}
}

// Whatever the bytes, what Array reads has strconv's bits.
func FuzzArrayMatchesStrconv(f *testing.F) {
	for _, a := range arrays {
		f.Add(a, uint8(8))
	}
	f.Fuzz(func(t *testing.T, a string, room uint8) {
		checkScan(t, []byte(a), 0, int(room%40))
	})
}
