package transform

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// PCG stream constants keep the landmark and the σ samples independent for
// the same seed.
const (
	landmarkStream = 0x6c616e646d61726b // "landmark"
	sigmaStream    = 0x7369676d61736d70 // "sigmasmp"
)

// LandmarkCount turns the landmark setting into a count p for n training
// rows: a value in (0, 1] is a fraction of the rows (rounded to nearest, at
// least 1; 1 means every row), an integer above 1 is a count, capped at n.
func LandmarkCount(n int, landmarks float64) (int, error) {
	if n < 1 {
		return 0, fmt.Errorf("landmarks: no training rows")
	}
	switch {
	case !(landmarks > 0) || math.IsInf(landmarks, 0):
		return 0, fmt.Errorf("landmarks %v: want a fraction in (0, 1] or a count ≥ 2", landmarks)
	case landmarks <= 1:
		return max(1, min(n, int(math.Round(landmarks*float64(n))))), nil
	case landmarks != math.Trunc(landmarks):
		return 0, fmt.Errorf("landmarks %v: a count must be a whole number (fractions are at most 1)", landmarks)
	default:
		return int(min(landmarks, float64(n))), nil
	}
}

// drawRows draws k distinct indices of [0, n) uniformly with a PCG seeded
// by (seed, stream), and returns them in increasing order. The draws for a
// smaller k are a subset of those for a larger one (the shuffle's prefix).
func drawRows(n, k int, seed, stream uint64) []int {
	rng := rand.New(rand.NewPCG(seed, stream))
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	// Partial Fisher–Yates: the first k entries are a uniform sample.
	for i := range k {
		j := i + rng.IntN(n-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	rows := perm[:k:k]
	slices.Sort(rows)
	return rows
}

// sigmaSampleRows is the row sample of the σ estimate: every row when n is
// within the bound, else a seeded sample of the bound's size.
func sigmaSampleRows(n, sampleRows int, seed uint64) []int {
	if sampleRows <= 0 {
		sampleRows = DefaultSigmaSample
	}
	bound := max(sampleRows, 2)
	if n <= bound {
		rows := make([]int, n)
		for i := range rows {
			rows[i] = i
		}
		return rows
	}
	return drawRows(n, bound, seed, sigmaStream)
}

// gatherRows copies the given rows of x into a new len(rows)×d matrix.
func gatherRows(x *mat.Dense, rows []int) *mat.Dense {
	_, d := x.Dims()
	out := mat.NewDense(len(rows), d, nil)
	for i, r := range rows {
		copy(out.RawRowView(i), x.RawRowView(r)[:d])
	}
	return out
}

// pairwiseDistance is the mean or median Euclidean distance over the
// distinct pairs of the given rows of x, from one Gram product.
func pairwiseDistance(x *mat.Dense, rows []int, median bool) float64 {
	s := gatherRows(x, rows)
	m := len(rows)
	rhs := newRightSide(Kernel{Type: schemas.KernelRBF}, s)
	d2 := mat.NewDense(m, m, nil)
	sq := d2.RawMatrix()
	runBlocks(m, defaultWorkers(), func() struct{} { return struct{}{} }, func(_ struct{}, lo, hi int) {
		sqDistBlock(rowsOf(sq, lo, hi), rowsOf(s.RawMatrix(), lo, hi), &rhs)
	}, nil)
	if median {
		dists := make([]float64, 0, m*(m-1)/2)
		for i := range m {
			for _, v := range d2.RawRowView(i)[i+1:] {
				dists = append(dists, math.Sqrt(v))
			}
		}
		slices.Sort(dists)
		h := len(dists) / 2
		if len(dists)%2 == 1 {
			return dists[h]
		}
		return (dists[h-1] + dists[h]) / 2
	}
	var sum float64
	for i := range m {
		for _, v := range d2.RawRowView(i)[i+1:] {
			sum += math.Sqrt(v)
		}
	}
	return sum / float64(m*(m-1)/2)
}
