package gemm

import (
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Implementation is gonum's pure-Go BLAS with a faster Dgemm that computes
// every bit of C as gonum's does.
//
// gonum's Dgemm, for A·B, Aᵀ·B and Aᵀ·Bᵀ, scales C by beta first, then
// computes each element in one fixed order whatever the blocking: for
// l = 0, 1, … k−1, tmp = alpha·a_il (a_li transposed), and where tmp != 0,
// c_ij = c_ij + tmp·b_lj, a rounded product then a rounded add. This one
// packs tmp and B into panels sized for the caches and runs an assembly
// micro-kernel that keeps a tile of C in registers and does the same
// operations in the same order (see gen_kernels.go). A·Bᵀ, which gonum
// computes by dot products with partial sums, and products too small for
// packing to pay, are gonum's.
type Implementation struct {
	gonum.Implementation
	kernel *microKernel // nil: gonum's Dgemm throughout
	bufs   *sync.Pool   // of *packBuffers
}

// New returns the Implementation with the widest micro-kernel this
// processor supports (gonum's Dgemm alone if none).
func New() Implementation {
	if ks := availableKernels(); len(ks) > 0 {
		return withKernel(ks[0])
	}
	return withKernel(nil)
}

func withKernel(k *microKernel) Implementation {
	return Implementation{kernel: k, bufs: &sync.Pool{New: func() any { return new(packBuffers) }}}
}

// KernelName names the micro-kernel Dgemm runs, or is empty when Dgemm is
// gonum's.
func (impl Implementation) KernelName() string {
	if impl.kernel == nil {
		return ""
	}
	return impl.kernel.name
}

// Lanes is how many float64s one register of the micro-kernel holds: 8 for
// AVX-512, 4 for AVX2, 0 when Dgemm is gonum's.
func (impl Implementation) Lanes() int {
	if impl.kernel == nil {
		return 0
	}
	return impl.kernel.lanes
}

// Takes reports whether Dgemm computes this product with its micro-kernel,
// rather than handing it to gonum's Dgemm: A·B, Aᵀ·B and Aᵀ·Bᵀ of enough
// multiply-adds for packing to pay, alpha and beta not NaN.
func (impl Implementation) Takes(tA, tB blas.Transpose, m, n, k int, alpha, beta float64) bool {
	aTrans := tA == blas.Trans || tA == blas.ConjTrans
	bTrans := tB == blas.Trans || tB == blas.ConjTrans
	// A NaN alpha or beta is gonum's too: which of two NaNs a product
	// keeps depends on the operand order Go's compiler chose in gonum's
	// code.
	return impl.kernel != nil && (aTrans || tA == blas.NoTrans) && (bTrans || tB == blas.NoTrans) && (aTrans || !bTrans) &&
		m > 0 && n > 0 && k > 0 && m*n*k >= minPackedWork && !math.IsNaN(alpha) && !math.IsNaN(beta)
}

// kernelFunc adds a packed rows×k panel of A times a k×(vectors·lanes)
// strip of B (row stride ldb) to the tile of C at c (row stride ldc).
type kernelFunc func(k int, a, b *float64, ldb int, c *float64, ldc int)

// microKernel is one instruction set's kernels: kernels[v-1] computes a
// strip of v registers, skips[v-1] the same leaving an element of C as it
// is where tmp == 0.
//
// packNoTrans and packTrans, where not nil, pack a panel of A in assembly:
// a whole one of A stored as is (writing up to rows·(rows−1) elements past
// the panel's end), or one of A stored transposed whose rows are the lanes
// of mask; they say whether some tmp is zero.
type microKernel struct {
	name        string
	rows, lanes int
	kernels     []kernelFunc
	skips       []kernelFunc
	packNoTrans func(k int, a *float64, lda int, alpha float64, dst *float64) (zero bool)
	packTrans   func(k int, a *float64, lda int, mask int, alpha float64, dst *float64) (zero bool)
}

func (mk *microKernel) maxCols() int { return len(mk.kernels) * mk.lanes }

// Blocking: a kc×nc block of B (packed where it must be, in L2/L3), an
// mc×kc block of A packed (393 KB, in L2), a kc×24 strip of B in L2 while
// the kernel runs down the A block's panels (3 loads of B a step of 48
// arithmetic instructions need no more). kc = 512 rather than 256: +7%
// (geomean of BenchmarkDgemm, +18% at 512³) on Zen 5.
const (
	blockK = 512
	blockM = 96
	blockN = 1536
	// Products of fewer multiply-adds than this are gonum's: packing does
	// not pay there.
	minPackedWork = 8 * 24 * 16
	// Products are split over GOMAXPROCS goroutines by rows of C where
	// each gets at least this many multiply-adds. On 2 vCPUs the split
	// gave +50–97% at 4096×128×128 and up with the other vCPU idle, and
	// nothing (idle) to −28% (loaded) at 432×64×432 (12M); mvml's callers
	// split their own row blocks already, so this is for the large single
	// calls of a fit.
	minPartWork = 1 << 23
)

// packBuffers are one goroutine's packed panels, reused between calls.
type packBuffers struct {
	a, b  []float64
	zeros []bool // per panel of a: some tmp is zero
	tile  []float64
}

// Dgemm computes C = alpha·op(A)·op(B) + beta·C as gonum's Dgemm does, bit
// for bit, and panics where it panics.
func (impl Implementation) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if !impl.Takes(tA, tB, m, n, k, alpha, beta) {
		impl.Implementation.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	aTrans := tA == blas.Trans || tA == blas.ConjTrans
	bTrans := tB == blas.Trans || tB == blas.ConjTrans
	// From here m, n, k > 0: gonum's remaining checks in gonum's order.
	if aTrans {
		if lda < max(1, m) {
			panic(badLdA)
		}
	} else if lda < max(1, k) {
		panic(badLdA)
	}
	if bTrans {
		if ldb < max(1, k) {
			panic(badLdB)
		}
	} else if ldb < max(1, n) {
		panic(badLdB)
	}
	if ldc < max(1, n) {
		panic(badLdC)
	}
	if aTrans {
		if len(a) < (k-1)*lda+m {
			panic(shortA)
		}
	} else if len(a) < (m-1)*lda+k {
		panic(shortA)
	}
	if bTrans {
		if len(b) < (n-1)*ldb+k {
			panic(shortB)
		}
	} else if len(b) < (k-1)*ldb+n {
		panic(shortB)
	}
	if len(c) < (m-1)*ldc+n {
		panic(shortC)
	}
	if alpha == 0 && beta == 1 {
		return
	}
	if beta != 1 {
		for i := range m {
			row := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(row)
				continue
			}
			for j := range row {
				row[j] *= beta
			}
		}
	}
	p := gemmProblem{aTrans: aTrans, bTrans: bTrans, k: k, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	parts := runtime.GOMAXPROCS(0)
	if parts == 1 || m*n*k < parts*minPartWork {
		impl.serial(p, 0, m, n)
		return
	}
	// Rows of C split in whole panels, each part packing its own B: B's
	// packing is k·n against the part's m·n·k/parts multiply-adds.
	panels := (m + impl.kernel.rows - 1) / impl.kernel.rows
	parts = min(parts, panels)
	var wg sync.WaitGroup
	for q := range parts {
		lo := min(m, q*panels/parts*impl.kernel.rows)
		hi := min(m, (q+1)*panels/parts*impl.kernel.rows)
		if lo < hi {
			wg.Go(func() { impl.serial(p, lo, hi, n) })
		}
	}
	wg.Wait()
}

// The panic messages of gonum's BLAS.
const (
	badLdA = "blas: bad leading dimension of A"
	badLdB = "blas: bad leading dimension of B"
	badLdC = "blas: bad leading dimension of C"
	shortA = "blas: insufficient length of a"
	shortB = "blas: insufficient length of b"
	shortC = "blas: insufficient length of c"
)

// gemmProblem is C += alpha·op(A)·op(B), C already scaled by beta.
type gemmProblem struct {
	aTrans, bTrans bool
	k              int
	alpha          float64
	a              []float64
	lda            int
	b              []float64
	ldb            int
	c              []float64
	ldc            int
}

// serial computes rows [i0, i1) and columns [0, n) of C, blocked Goto-style:
// for each block of columns, each block of l in order (so that every
// element of C sees l = 0, 1, … in gonum's order), B's block packed once,
// then each block of rows with A's block packed, then the kernel on every
// tile.
func (impl Implementation) serial(p gemmProblem, i0, i1, n int) {
	mk := impl.kernel
	buf := impl.bufs.Get().(*packBuffers)
	defer impl.bufs.Put(buf)
	nr := mk.maxCols()
	buf.tile = grow(buf.tile, mk.rows*nr)
	for jc := 0; jc < n; jc += blockN {
		nb := min(blockN, n-jc)
		for pc := 0; pc < p.k; pc += blockK {
			kb := min(blockK, p.k-pc)
			impl.packB(buf, p, pc, kb, jc, nb)
			for ic := i0; ic < i1; ic += blockM {
				mb := min(blockM, i1-ic)
				impl.packA(buf, p, ic, mb, pc, kb)
				impl.macroKernel(buf, p, ic, mb, pc, kb, jc, nb)
			}
		}
	}
}

// packB packs B's rows [pc, pc+kb), columns [jc, jc+nb) as strips of
// maxCols columns (the last one of as many registers as it needs, padded
// with zeros), each l-major; but a strip the kernel reads from B itself.
func (impl Implementation) packB(buf *packBuffers, p gemmProblem, pc, kb, jc, nb int) {
	mk := impl.kernel
	nr := mk.maxCols()
	buf.b = grow(buf.b, kb*mk.stripWidth(nb))
	for jr := 0; jr < nb; jr += nr {
		w := min(nr, nb-jr)
		ws := mk.stripWidth(w)
		if unpackedB(p, w, ws) {
			continue
		}
		strip := buf.b[jr*kb : jr*kb+kb*ws]
		if p.bTrans {
			for j := range w {
				col := p.b[(jc+jr+j)*p.ldb+pc:]
				for l := range kb {
					strip[l*ws+j] = col[l]
				}
			}
			for l := range kb {
				clear(strip[l*ws+w : (l+1)*ws])
			}
			continue
		}
		for l := range kb {
			row := strip[l*ws : (l+1)*ws]
			copy(row, p.b[(pc+l)*p.ldb+jc+jr:(pc+l)*p.ldb+jc+jr+w])
			clear(row[w:])
		}
	}
}

// unpackedB says whether the kernel reads a strip of w columns of B (ws
// in registers) from B itself: B stored as is and the strip whole
// registers wide. Its rows are then ldb apart, not packed, which costs
// nothing in the kernel and saves a copy of B, as costly as the kernel
// itself when C has few rows.
func unpackedB(p gemmProblem, w, ws int) bool { return !p.bTrans && w == ws }

// stripWidth is the columns of a packed strip holding w columns of B.
func (mk *microKernel) stripWidth(w int) int {
	return (w + mk.lanes - 1) / mk.lanes * mk.lanes
}

// packA packs tmp = alpha·a for A's rows [ic, ic+mb), l in [pc, pc+kb), as
// panels of mk.rows rows (the last padded with zeros), each l-major, and
// notes which panels hold a zero tmp (padding aside).
func (impl Implementation) packA(buf *packBuffers, p gemmProblem, ic, mb, pc, kb int) {
	mk := impl.kernel
	mr := mk.rows
	panels := (mb + mr - 1) / mr
	buf.a = grow(buf.a, panels*mr*kb+mr*mr)
	if cap(buf.zeros) < panels {
		buf.zeros = make([]bool, panels)
	}
	buf.zeros = buf.zeros[:panels]
	for q := range panels {
		panel := buf.a[q*mr*kb : (q+1)*mr*kb]
		h := min(mr, mb-q*mr)
		switch {
		case p.aTrans && mk.packTrans != nil:
			buf.zeros[q] = mk.packTrans(kb, &p.a[pc*p.lda+ic+q*mr], p.lda, 1<<h-1, p.alpha, &panel[0])
			continue
		case !p.aTrans && h == mr && mk.packNoTrans != nil:
			buf.zeros[q] = mk.packNoTrans(kb, &p.a[(ic+q*mr)*p.lda+pc], p.lda, p.alpha, &panel[0])
			continue
		}
		zero := false
		if p.aTrans {
			for l := range kb {
				src := p.a[(pc+l)*p.lda+ic+q*mr:]
				dst := panel[l*mr : (l+1)*mr]
				for r := range h {
					tmp := p.alpha * src[r]
					zero = zero || tmp == 0
					dst[r] = tmp
				}
				clear(dst[h:])
			}
		} else {
			if h < mr {
				clear(panel)
			}
			for r := range h {
				src := p.a[(ic+q*mr+r)*p.lda+pc : (ic+q*mr+r)*p.lda+pc+kb]
				for l, v := range src {
					tmp := p.alpha * v
					zero = zero || tmp == 0
					panel[l*mr+r] = tmp
				}
			}
		}
		buf.zeros[q] = zero
	}
}

// macroKernel runs the kernel on every tile of C's rows [ic, ic+mb),
// columns [jc, jc+nb), l-block of kb: strips of B outer, so that one stays
// in L1 while the kernel runs down A's panels. A tile that is not whole
// (at the bottom or right edge) is computed in buf.tile and copied.
func (impl Implementation) macroKernel(buf *packBuffers, p gemmProblem, ic, mb, pc, kb, jc, nb int) {
	mk := impl.kernel
	mr, nr := mk.rows, mk.maxCols()
	for jr := 0; jr < nb; jr += nr {
		w := min(nr, nb-jr)
		ws := mk.stripWidth(w)
		vectors := ws / mk.lanes
		bStrip, ldb := &buf.b[jr*kb], ws
		if unpackedB(p, w, ws) {
			bStrip, ldb = &p.b[pc*p.ldb+jc+jr], p.ldb
		}
		for ir := 0; ir < mb; ir += mr {
			h := min(mr, mb-ir)
			kernel := mk.kernels[vectors-1]
			if buf.zeros[ir/mr] {
				kernel = mk.skips[vectors-1]
			}
			aPanel := &buf.a[ir*kb]
			cOff := (ic+ir)*p.ldc + jc + jr
			if h == mr && w == ws {
				kernel(kb, aPanel, bStrip, ldb, &p.c[cOff], p.ldc)
				continue
			}
			for r := range h {
				copy(buf.tile[r*ws:r*ws+w], p.c[cOff+r*p.ldc:cOff+r*p.ldc+w])
			}
			kernel(kb, aPanel, bStrip, ldb, &buf.tile[0], ws)
			for r := range h {
				copy(p.c[cOff+r*p.ldc:cOff+r*p.ldc+w], buf.tile[r*ws:r*ws+w])
			}
		}
	}
}

// grow returns s with length n, reallocated only when too small.
func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}
