//go:build amd64 && !noasm && !noasm_rbf

package rbf

import "golang.org/x/sys/cpu"

// rowExp4 and rowExp8 are RowGo on 4 (AVX2 and FMA) or 8 (AVX-512F)
// lanes, for as long as every lane of a block takes math.Exp's ordinary
// path (rbf_amd64.s); each returns how many elements it set, a multiple
// of its width.
//
//go:noescape
func rowExp4(row, norms []float64, nx, negGamma float64) int

//go:noescape
func rowExp8(row, norms []float64, nx, negGamma float64) int

// kernels are the vector kernels this processor runs, widest first.
// math.Exp computes with fused multiply-adds only where the processor has
// AVX and FMA, and the kernels repeat that path: without them, none.
func kernels() []kernel {
	if !cpu.X86.HasAVX || !cpu.X86.HasFMA || !cpu.X86.HasAVX2 {
		return nil
	}
	exp4 := kernel{rowExp4, 4}
	if cpu.X86.HasAVX512F {
		return []kernel{{rowExp8, 8}, exp4}
	}
	return []kernel{exp4}
}
