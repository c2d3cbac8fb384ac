//go:build !amd64 || noasm || noasm_dd

package dd

// axpyWide does nothing without the assembly (other processors, or the
// tags noasm and noasm_dd): AxpyGo does every element.
func axpyWide(a float64, x, hi, lo []float64) int { return 0 }

// axpy8Wide is axpyWide for Axpy8.
func axpy8Wide(a *[8]float64, x *[8][]float64, hi, lo []float64) int { return 0 }

// addWide is axpyWide for Add.
func addWide(hi, lo, oHi, oLo []float64) int { return 0 }

// kernels is empty: there are no wide kernels.
func kernels() []kernel { return nil }
