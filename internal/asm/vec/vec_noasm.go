//go:build !amd64 || noasm || noasm_vec

package vec

// useAVX2 is false without the assembly (other processors, or the tags
// noasm and noasm_vec): the Go twins run.
const useAVX2 = false

// The kernels' names, which the exported functions never call in this
// build, are their twins.

func dotAVX2(x, y []float64) float64                                { return DotGo(x, y) }
func axpyAVX2(a float64, x, y []float64)                            { AxpyGo(a, x, y) }
func rotAVX2(ac, snc, c, sn float64, r, x []float64)                { RotGo(ac, snc, c, sn, r, x) }
func dot4AVX2(r0, r1, r2, r3, x []float64) (s0, s1, s2, s3 float64) { return Dot4Go(r0, r1, r2, r3, x) }
func axpy4AVX2(a *[4]float64, r0, r1, r2, r3, y []float64)          { Axpy4Go(a, r0, r1, r2, r3, y) }
