package transform

import (
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// reservoirStream is the PCG stream of Reservoir, apart from the landmark
// and σ streams of the same seed.
const reservoirStream = 0x5a4d

// Reservoir keeps a uniform sample of at most a fixed number of rows of a
// stream of multi-view rows (Algorithm R, seeded): after n rows, each of
// them is in the sample with probability min(1, size/n), whatever the
// batches they came in. A training that reads more rows than it can hold
// chooses its landmarks and σ on the sample (Fit on Sample). Not safe for
// concurrent use.
type Reservoir struct {
	size int
	dims []int
	rng  *rand.Rand
	rows [][]float64 // per view, the kept rows row-major, slot after slot
	seen int64
}

// NewReservoir returns an empty sample of at most size rows of views of
// the given dimensions, drawn with seed.
func NewReservoir(dims []int, size int, seed uint64) *Reservoir {
	return &Reservoir{size: size, dims: dims, rng: rand.New(rand.NewPCG(seed, reservoirStream)), rows: make([][]float64, len(dims))}
}

// Add offers the rows of views (views[l] is k×d_l) to the sample one after
// the other, and sets slots[i] to the slot of the sample that row i took,
// replacing the row that held it, or to −1 when the row was not kept.
// slots must have k elements; a caller that keeps something per sampled
// row (such as where it came from) keeps it by slot.
func (r *Reservoir) Add(slots []int, views []*mat.Dense) {
	for i := range slots {
		slot := -1
		if r.seen < int64(r.size) {
			slot = int(r.seen)
		} else if j := r.rng.Int64N(r.seen + 1); j < int64(r.size) {
			slot = int(j)
		}
		slots[i] = slot
		r.seen++
		if slot < 0 {
			continue
		}
		for l, d := range r.dims {
			row := views[l].RawRowView(i)[:d]
			if slot == len(r.rows[l])/d {
				r.rows[l] = append(r.rows[l], row...)
			} else {
				copy(r.rows[l][slot*d:], row)
			}
		}
	}
}

// Seen is the number of rows offered so far.
func (r *Reservoir) Seen() int64 { return r.seen }

// Sample returns the kept rows, one matrix per view (kept×d_l, in slot
// order) over the reservoir's storage: a later Add changes them.
func (r *Reservoir) Sample() []*mat.Dense {
	out := make([]*mat.Dense, len(r.rows))
	for l, vals := range r.rows {
		d := r.dims[l]
		if len(vals) == 0 {
			out[l] = &mat.Dense{}
			continue
		}
		out[l] = mat.NewDense(len(vals)/d, d, vals)
	}
	return out
}
