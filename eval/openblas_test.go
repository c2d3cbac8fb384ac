//go:build openblas

package eval

// Under the tag openblas this package's tests compute on OpenBLAS, as the
// commands built with the tag do (make test-openblas).
import _ "github.com/mvml/mvml/internal/blasimpl"
