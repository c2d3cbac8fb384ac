package ingest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/mvml/mvml/schemas"
)

// arraySpec is a spec whose one view, "a", is an array of dim numbers.
func arraySpec(tb testing.TB, dim int) *schemas.ViewSpec {
	tb.Helper()
	spec := &schemas.ViewSpec{Task: schemas.Regression, ID: "id", Label: "label", Views: []schemas.View{{Name: "a", Prefix: "a_", Dim: dim}}}
	if err := spec.Validate(); err != nil {
		tb.Fatal(err)
	}
	return spec
}

// decodeBoth decodes msg with scanArray and without it (every item by
// scanFloat) and fails unless both give the same values, to the bit, or
// the same reject.
func decodeBoth(t *testing.T, spec *schemas.ViewSpec, msg []byte) {
	t.Helper()
	fast, ref := newKafkaDecoder(spec, false), newKafkaDecoder(spec, false)
	ref.scanArrays = false
	fastVals, refVals := viewScratch(spec), viewScratch(spec)
	fastBad, refBad := fast.decode(msg, fastVals), ref.decode(msg, refVals)
	switch {
	case (fastBad == nil) != (refBad == nil):
		t.Fatalf("%q: with scanArray %v, without %v", msg, fastBad, refBad)
	case fastBad != nil:
		if *fastBad != *refBad {
			t.Fatalf("%q: with scanArray %+v, without %+v", msg, *fastBad, *refBad)
		}
		return
	}
	for l := range fastVals {
		for j, want := range refVals[l] {
			if got := fastVals[l][j]; math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%q: value %d is %v (%#x) with scanArray, %v (%#x) without", msg, j, got, math.Float64bits(got), want, math.Float64bits(want))
			}
		}
	}
}

// scanArrayCases are arrays for view a (4 numbers) that scanArray reads,
// stops in, or must leave alone.
var scanArrayCases = []string{
	`[1,2,3,4]`, `[0,-0,0.0,-0.000]`, `[1.5,-2.25,0.125,1e0]`,
	`[0.1,0.2,0.30000000000000004,-0.7712394810290434]`,
	`[1.2345678901234567,12345678901234567,-0.012345678901234567,9.999999999999999]`,
	`[1234567890123456789,-1234567890123456789,12345678901234567890,0.0000000000000000001]`,
	`[9007199254740992,9007199254740993,9007199254740995,-9007199254740993]`, // 2^53 and ties above it
	`[0.0000152587890625,0.5,0.25,0.75]`,
	`[1, 2,  3,   4]`, `[ 1,2,3,4]`, `[1 ,2,3,4]`, `[1,2,3,4 ]`, "[1,\t2,\n3,\r4]",
	`[1e5,2E-3,3.5e+2,-4e0]`, `[1,2e1,3,4]`, `[1,2,3,4e1]`,
	`[01,2,3,4]`, `[1,00,3,4]`, `[1,2,-01.5,4]`, `[.5,2,3,4]`, `[1,5.,3,4]`, `[1,2,3,.]`,
	`[-,2,3,4]`, `[--1,2,3,4]`, `[+1,2,3,4]`, `[1,-,3,4]`, `[1,2..5,3,4]`, `[1,2.5.5,3,4]`,
	`[1,2,3]`, `[1,2,3,4,5]`, `[1,2,3,4,5,6,7,8,9,10]`, `[]`, `[,]`, `[1,,3,4]`, `[1,2,3,4,]`,
	`[1,"2",3,4]`, `[1,"2,3",4]`, `[1,[2,3],4]`, `[1,true,3,4]`, `[1,null,3,4]`, `[1,{},3,4]`,
	`[1,2,3,4`, `[1,2,3,4}`, `[1,2,3`, `[1`, `[`,
	`[1.7976931348623157,2.2250738585072014,4.9406564584124654,1e308]`,
	`[123456789012345678901234567890,1,2,3]`, `[0.00000000000000000000000001,1,2,3]`,
	`[1111111111111111111.5,1.11111111111111111111,2,3]`,
	`[1234567890.1234567891,99999999999999999999,2,3]`,
}

func TestScanArrayMatchesScanFloat(t *testing.T) {
	spec := arraySpec(t, 4)
	for _, a := range scanArrayCases {
		decodeBoth(t, spec, []byte(`{"id":1,"a":`+a+`}`))
		decodeBoth(t, spec, []byte(`{"a":`+a+`,"id":1}`))
		decodeBoth(t, spec, []byte(`{"id":1,"a":`+a)) // the array at the end of data
	}
}

// Random arrays of 40 numbers in the forms writers use, whole and cut
// short at every length.
func TestScanArrayRandomArrays(t *testing.T) {
	const dim = 40
	spec := arraySpec(t, dim)
	rng := rand.New(rand.NewPCG(3, 4))
	forms := []func(x float64) string{
		func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) },
		func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 32) },
		func(x float64) string { return strconv.FormatFloat(x, 'f', rng.IntN(20), 64) },
		func(x float64) string { return strconv.FormatFloat(x, 'e', rng.IntN(18), 64) },
		func(x float64) string { return strconv.FormatFloat(math.Round(x*65536)/65536, 'f', -1, 64) },
		func(x float64) string { return strconv.FormatInt(int64(x*1e15), 10) },
	}
	scales := []float64{1e-20, 1e-5, 0.01, 1, 1, 1, 100, 1e10, 1e17}
	for round := range 400 {
		form, scale := forms[round%len(forms)], scales[rng.IntN(len(scales))]
		sep := ","
		if round%7 == 0 {
			sep = ", "
		}
		var b strings.Builder
		b.WriteString(`{"id":1,"a":[`)
		for j := range dim {
			if j > 0 {
				b.WriteString(sep)
			}
			x := rng.NormFloat64() * scale
			if round%5 == 0 && j%9 == 4 {
				x = float64(rng.IntN(1000)) / 8 // short exact decimals
			}
			b.WriteString(form(x))
		}
		b.WriteString(`]}`)
		msg := []byte(b.String())
		decodeBoth(t, spec, msg)
		if round%20 == 0 {
			for n := range len(msg) {
				decodeBoth(t, spec, msg[:n])
			}
		}
	}
}

// FuzzScanArray checks that arrays decode the same with scanArray and
// without it, whatever they hold.
func FuzzScanArray(f *testing.F) {
	for _, a := range scanArrayCases {
		f.Add(a)
	}
	spec := arraySpec(f, 4)
	f.Fuzz(func(t *testing.T, a string) {
		decodeBoth(t, spec, []byte(`{"id":1,"a":`+a+`}`))
		decodeBoth(t, spec, []byte(`{"id":1,"a":`+a))
	})
}

// BenchmarkScanArray decodes arrays of 192 numbers in the forms above,
// with scanArray and without it.
func BenchmarkScanArray(b *testing.B) {
	const dim = 192
	spec := arraySpec(b, dim)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, form := range []struct {
		name   string
		format func(x float64) string
	}{
		{"shortest64", func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }},
		{"shortest32", func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 32) }},
		{"fixed4", func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }},
		{"exponent", func(x float64) string { return strconv.FormatFloat(x, 'e', -1, 64) }},
	} {
		// Many messages: a processor learns the branches of one by heart.
		msgs := make([][]byte, 1024)
		size := 0
		for i := range msgs {
			var sb strings.Builder
			sb.WriteString(`{"id":1,"a":[`)
			for j := range dim {
				if j > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(form.format(rng.NormFloat64()))
			}
			sb.WriteString(`]}`)
			msgs[i] = []byte(sb.String())
			size += len(msgs[i])
		}
		for _, scan := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/scanArray=%v", form.name, scan), func(b *testing.B) {
				d := newKafkaDecoder(spec, false)
				d.scanArrays = scan
				vals := viewScratch(spec)
				b.SetBytes(int64(size / len(msgs)))
				i := 0
				for b.Loop() {
					if bad := d.decode(msgs[i%len(msgs)], vals); bad != nil {
						b.Fatal(bad.reason)
					}
					i++
				}
				b.ReportMetric(float64(b.N*dim)/b.Elapsed().Seconds(), "numbers/s")
			})
		}
	}
}
