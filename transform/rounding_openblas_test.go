//go:build openblas

package transform

// Under the tag openblas this package's tests compute on OpenBLAS, as the
// commands built with the tag do (make test-openblas).
import _ "github.com/mvml/mvml/internal/blasimpl"

// blasRounding is how far, relative to the scale of its terms, a result may
// be from the same computation done in another shape (a row alone rather
// than in a batch) or by the pure-Go build: OpenBLAS chooses its kernels by
// shape and fuses multiply-adds, so its results agree to rounding, not bit
// for bit. 1e-10 is what mvml promises of that build.
const blasRounding = 1e-10
