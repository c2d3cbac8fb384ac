//go:build amd64 && !noasm && !noasm_vec

package vec

import "golang.org/x/sys/cpu"

// useAVX2 says that the processor runs the AVX2 kernels, which need FMA.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dotAVX2 is DotGo on AVX2 (vec_amd64.s).
//
//go:noescape
func dotAVX2(x, y []float64) float64

// axpyAVX2 is AxpyGo on AVX2.
//
//go:noescape
func axpyAVX2(a float64, x, y []float64)

// rotAVX2 is RotGo on AVX2.
//
//go:noescape
func rotAVX2(ac, snc, c, sn float64, r, x []float64)

// dot4AVX2 is Dot4Go on AVX2, two rows at a time.
//
//go:noescape
func dot4AVX2(r0, r1, r2, r3, x []float64) (s0, s1, s2, s3 float64)

// axpy4AVX2 is Axpy4Go on AVX2, y loaded and stored once for the four
// rows.
//
//go:noescape
func axpy4AVX2(a *[4]float64, r0, r1, r2, r3, y []float64)
