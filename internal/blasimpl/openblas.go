//go:build openblas

package blasimpl

/*
#cgo LDFLAGS: -lopenblas
char *openblas_get_config(void);
void openblas_set_num_threads(int);
*/
import "C"

import (
	"os"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/netlib/blas/netlib"
)

func init() {
	blas64.Use(netlib.Implementation{})
	// mvml spreads its products over GOMAXPROCS goroutines already (blocks
	// of rows, one-vs-all heads); OpenBLAS threads on top of those fight
	// them for the same cores, and on the 64-row blocks of a kernel product
	// its threading alone halved the speed of one call. One OpenBLAS thread
	// per call, unless the user sets the count OpenBLAS reads.
	if os.Getenv("OPENBLAS_NUM_THREADS") == "" && os.Getenv("GOTO_NUM_THREADS") == "" && os.Getenv("OMP_NUM_THREADS") == "" {
		C.openblas_set_num_threads(1)
	}
}

// Name says which BLAS the program computes with, as the linked OpenBLAS
// describes its own build (version, kernel, threading).
func Name() string { return "OpenBLAS (" + C.GoString(C.openblas_get_config()) + ")" }
