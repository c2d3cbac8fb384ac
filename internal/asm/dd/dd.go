package dd

// Axpy adds a·x[j] (rounded) to the double-double hi[j] + lo[j]: hi[j]
// takes the rounded sum, as a plain axpy would, lo[j] its error. x and lo
// must have len(hi) elements at least. On AVX2 it does four elements at a
// time, on AVX-512 eight, in AxpyGo's bits: the sums of S are most of a
// streamed training's work, and a double-double costs seven additions per
// term where a plain sum costs one.
func Axpy(a float64, x, hi, lo []float64) {
	x, lo = x[:len(hi)], lo[:len(hi)]
	done := axpyWide(a, x, hi, lo)
	AxpyGo(a, x[done:], hi[done:], lo[done:])
}

// Axpy8 is Axpy for eight rows in turn, a[0]·x[0] first: the same bits,
// with every element's double-double loaded and stored once for the eight
// terms instead of once a term. Every row must have len(hi) elements at
// least.
func Axpy8(a *[8]float64, x *[8][]float64, hi, lo []float64) {
	n := len(hi)
	lo = lo[:n]
	for _, row := range x {
		_ = row[:n] // the wide kernels read n elements of every row
	}
	done := axpy8Wide(a, x, hi, lo)
	if done == n {
		return
	}
	// The tail, or every element without a wide kernel, a row at a time:
	// the same bits, and in Go faster than eight terms an element, whose
	// additions wait on one another.
	for r, row := range x {
		AxpyGo(a[r], row[done:n], hi[done:], lo[done:])
	}
}

// AxpyGo is Axpy in Go, for any processor: the twin whose bits the
// kernels give.
func AxpyGo(a float64, x, hi, lo []float64) {
	x, lo = x[:len(hi)], lo[:len(hi)] // one bounds check for the loop
	for j, h := range hi {
		hi[j], lo[j] = addTerm(h, lo[j], float64(a*x[j]))
	}
}

// Add adds the double-doubles (oHi[j], oLo[j]) to (hi[j], lo[j]) and
// renormalizes each sum: hi[j] becomes the float64 nearest to it, lo[j]
// what remains. It is how statistics merge: on AVX2 four elements at a
// time, in AddGo's bits. oHi, oLo and lo must have len(hi) elements at
// least.
func Add(hi, lo, oHi, oLo []float64) {
	lo, oHi, oLo = lo[:len(hi)], oHi[:len(hi)], oLo[:len(hi)]
	done := addWide(hi, lo, oHi, oLo)
	AddGo(hi[done:], lo[done:], oHi[done:], oLo[done:])
}

// AddGo is Add in Go, for any processor: the twin whose bits the kernel
// gives. The sum is one TwoSum of the values with the residues added to
// its error, then one TwoSum of the result, whose residue is 0 + error
// (never a negative zero).
func AddGo(hi, lo, oHi, oLo []float64) {
	lo, oHi, oLo = lo[:len(hi)], oHi[:len(hi)], oLo[:len(hi)]
	for j, h := range hi {
		h, l := addTerm(h, lo[j]+oLo[j], oHi[j])
		hi[j], lo[j] = addTerm(h, 0, l)
	}
}

// addTerm adds the term p to the double-double (hi, lo) as model's
// addTerm does (Knuth's TwoSum). The conversion of a product to float64
// where addTerm is called keeps a compiler from fusing it into the
// addition.
func addTerm(hi, lo, p float64) (float64, float64) {
	s := hi + p
	b := s - hi
	return s, lo + ((hi - (s - b)) + (p - b))
}

// kernel is one width of wide kernels: one row's and eight rows', and
// the merge's (nil where the width has none, which Add then leaves to a
// narrower one), each returning how many elements it did.
type kernel struct {
	name  string
	one   func(a float64, x, hi, lo []float64) int
	eight func(a *[8]float64, x *[8][]float64, hi, lo []float64) int
	add   func(hi, lo, oHi, oLo []float64) int
}
