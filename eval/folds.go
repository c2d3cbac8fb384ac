package eval

import (
	"fmt"
	"math"
	"slices"
)

// Folds splits the rows into k folds of test rows, exactly as
// scikit-learn does with the same seed: StratifiedKFold(n_splits=k,
// shuffle=True, random_state=seed) when stratify is set, else
// KFold(n_splits=k, shuffle=True, random_state=seed). Matching the split
// row for row means a figure from `mvml cv --seed S` and one from a
// Python cross-validation with random_state=S are measured on the same
// folds, so they can be compared directly; fold-to-fold spread on a few
// hundred rows is mostly the split's, not the method's.
//
// The seed must fit in 32 bits, as numpy requires of a RandomState seed.
// Each returned fold lists its test rows in increasing order.
func Folds(labels []float64, k int, seed uint64, stratify bool) ([][]int, error) {
	n := len(labels)
	if k < 2 || k > n {
		return nil, fmt.Errorf("folds: %d folds for %d rows", k, n)
	}
	if seed > math.MaxUint32 {
		return nil, fmt.Errorf("folds: seed %d does not fit in 32 bits", seed)
	}
	rng := newMT19937(uint32(seed))
	fold := make([]int, n) // fold[i] is the test fold of row i
	if stratify {
		if err := stratifiedFolds(labels, k, rng, fold); err != nil {
			return nil, err
		}
	} else {
		// KFold: shuffle 0..n-1, then cut it into k contiguous runs, the
		// first n mod k of them one row longer.
		perm := make([]int, n)
		for i := range perm {
			perm[i] = i
		}
		rng.shuffle(perm)
		start := 0
		for f := range k {
			size := n / k
			if f < n%k {
				size++
			}
			for _, r := range perm[start : start+size] {
				fold[r] = f
			}
			start += size
		}
	}
	folds := make([][]int, k)
	for i, f := range fold {
		folds[f] = append(folds[f], i)
	}
	return folds, nil
}

// stratifiedFolds follows StratifiedKFold._make_test_folds (scikit-learn
// ≥ 0.22): classes are numbered by first appearance; the labels sorted by
// that number are dealt round-robin to decide how many rows of each class
// every fold receives; then, class by class, the block of fold numbers is
// shuffled and handed to the class's rows in row order.
func stratifiedFolds(labels []float64, k int, rng *mt19937, fold []int) error {
	code := map[float64]int{}
	encoded := make([]int, len(labels))
	var counts []int
	for i, v := range labels {
		c, ok := code[v]
		if !ok {
			c = len(counts)
			code[v] = c
			counts = append(counts, 0)
		}
		encoded[i] = c
		counts[c]++
	}
	if slices.Max(counts) < k {
		return fmt.Errorf("folds: %d folds, but no class has %d rows", k, k)
	}
	// allocation[f][c]: rows of class c in fold f. Dealing the sorted codes
	// round-robin gives fold f the positions f, f+k, f+2k, ... of the sorted
	// sequence.
	allocation := make([][]int, k)
	for f := range allocation {
		allocation[f] = make([]int, len(counts))
	}
	pos := 0
	for c, cnt := range counts {
		for range cnt {
			allocation[pos%k][c]++
			pos++
		}
	}
	rowsOf := make([][]int, len(counts))
	for i, c := range encoded {
		rowsOf[c] = append(rowsOf[c], i)
	}
	for c, rows := range rowsOf {
		blocks := make([]int, 0, len(rows))
		for f := range k {
			for range allocation[f][c] {
				blocks = append(blocks, f)
			}
		}
		rng.shuffle(blocks)
		for j, r := range rows {
			fold[r] = blocks[j]
		}
	}
	return nil
}

// mt19937 is numpy's legacy RandomState generator (the Mersenne Twister
// seeded by init_genrand), kept only to reproduce scikit-learn's folds.
type mt19937 struct {
	state [624]uint32
	pos   int
}

func newMT19937(seed uint32) *mt19937 {
	m := &mt19937{pos: len(mt19937{}.state)}
	for i := range m.state {
		m.state[i] = seed
		seed = 1812433253*(seed^(seed>>30)) + uint32(i) + 1
	}
	return m
}

func (m *mt19937) uint32() uint32 {
	const n, mid = 624, 397
	if m.pos == n {
		for i := range n {
			y := m.state[i]&0x80000000 | m.state[(i+1)%n]&0x7fffffff
			next := m.state[(i+mid)%n] ^ y>>1
			if y&1 != 0 {
				next ^= 0x9908b0df
			}
			m.state[i] = next
		}
		m.pos = 0
	}
	y := m.state[m.pos]
	m.pos++
	y ^= y >> 11
	y ^= y << 7 & 0x9d2c5680
	y ^= y << 15 & 0xefc60000
	return y ^ y>>18
}

// interval returns a uniform integer in [0, max] by masked rejection, as
// numpy's random_interval does (max < 2³² here).
func (m *mt19937) interval(max uint32) uint32 {
	if max == 0 {
		return 0
	}
	mask := max
	for s := uint(1); s < 32; s <<= 1 {
		mask |= mask >> s
	}
	for {
		if v := m.uint32() & mask; v <= max {
			return v
		}
	}
}

// shuffle permutes xs in place as RandomState.shuffle does (Fisher–Yates
// from the end).
func (m *mt19937) shuffle(xs []int) {
	for i := len(xs) - 1; i > 0; i-- {
		j := m.interval(uint32(i))
		xs[i], xs[j] = xs[j], xs[i]
	}
}
