package transform

import (
	"runtime"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// rowBlock is the number of rows computed together. A 64×p kernel block
// (64 KiB at p = 128) stays in cache between its two matrix products, and
// for p ≤ 192 gonum runs each product serially, so the worker pool is the
// only parallelism. 64 beat 128, 256 and 512 in BenchmarkProject here.
const rowBlock = 64

// defaultWorkers is the worker count of the exported methods.
func defaultWorkers() int { return runtime.GOMAXPROCS(0) }

// runBlocks calls work(state, lo, hi) for the consecutive blocks of rowBlock
// rows of [0, n), on at most workers goroutines. Each goroutine gets its own
// state from newState (scratch buffers), so workers share nothing mutable,
// and hands it to done, when not nil, once it has no more blocks to do.
// Block boundaries do not depend on workers, which keeps results identical
// for any worker count.
func runBlocks[S any](n, workers int, newState func() S, work func(s S, lo, hi int), done func(S)) {
	if done == nil {
		done = func(S) {}
	}
	blocks := (n + rowBlock - 1) / rowBlock
	workers = min(workers, blocks)
	if workers <= 1 {
		s := newState()
		for lo := 0; lo < n; lo += rowBlock {
			work(s, lo, min(lo+rowBlock, n))
		}
		done(s)
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			s := newState()
			defer done(s)
			for {
				b := int(next.Add(1)) - 1
				if b >= blocks {
					return
				}
				lo := b * rowBlock
				work(s, lo, min(lo+rowBlock, n))
			}
		})
	}
	wg.Wait()
}

// rowsOf returns rows [lo, hi) of m as a general matrix sharing m's data.
func rowsOf(m blas64.General, lo, hi int) blas64.General {
	return blas64.General{
		Rows:   hi - lo,
		Cols:   m.Cols,
		Stride: m.Stride,
		Data:   m.Data[lo*m.Stride : (hi-1)*m.Stride+m.Cols],
	}
}

// prepareDst makes dst r×c in gonum's manner: an empty dst is sized, a
// non-empty one must already be r×c (anything else is a programmer error).
// Every caller overwrites all of dst, so an empty dst whose storage is large
// enough (a buffer Reset after an earlier batch) takes it as it is: ReuseAs
// would first zero it, a pass over 4 MiB per view of a scoring batch.
func prepareDst(dst *mat.Dense, r, c int) {
	if dst.IsEmpty() {
		if data := dst.RawMatrix().Data; r > 0 && c > 0 && cap(data) >= r*c {
			dst.SetRawMatrix(blas64.General{Rows: r, Cols: c, Stride: c, Data: data[:r*c]})
			return
		}
		dst.ReuseAs(r, c)
		return
	}
	if dr, dc := dst.Dims(); dr != r || dc != c {
		panic(mat.ErrShape)
	}
}
