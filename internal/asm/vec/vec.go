package vec

import "math"

// lanes is the width of the partial sums.
const lanes = 8

// Dot returns xᵀy over len(x) elements; y must have as many.
func Dot(x, y []float64) float64 {
	y = y[:len(x)]
	if useAVX2 {
		return dotAVX2(x, y)
	}
	return DotGo(x, y)
}

// Axpy adds a·x to y over len(y) elements, fused; x must have as many.
func Axpy(a float64, x, y []float64) {
	x = x[:len(y)]
	if useAVX2 {
		axpyAVX2(a, x, y)
		return
	}
	AxpyGo(a, x, y)
}

// Rot applies a Givens rotation to a row r of a factor and the rest x of
// an update vector (RotGo); r must have len(x) elements.
func Rot(ac, snc, c, sn float64, r, x []float64) {
	r = r[:len(x)]
	if useAVX2 {
		rotAVX2(ac, snc, c, sn, r, x)
		return
	}
	RotGo(ac, snc, c, sn, r, x)
}

// Dot4 returns the dot products of the rows r0…r3 with x over len(x)
// elements; each row must have as many.
func Dot4(r0, r1, r2, r3, x []float64) (s0, s1, s2, s3 float64) {
	n := len(x)
	r0, r1, r2, r3 = r0[:n], r1[:n], r2[:n], r3[:n]
	if useAVX2 {
		return dot4AVX2(r0, r1, r2, r3, x)
	}
	return Dot4Go(r0, r1, r2, r3, x)
}

// Axpy4 adds a[0]·r0, then a[1]·r1, a[2]·r2 and a[3]·r3 to y over len(y)
// elements, each fused; each row must have as many.
func Axpy4(a *[4]float64, r0, r1, r2, r3, y []float64) {
	n := len(y)
	r0, r1, r2, r3 = r0[:n], r1[:n], r2[:n], r3[:n]
	if useAVX2 {
		axpy4AVX2(a, r0, r1, r2, r3, y)
		return
	}
	Axpy4Go(a, r0, r1, r2, r3, y)
}

// hsum adds the eight lanes of z: the upper half onto the lower, then
// pairs, then the last two.
func hsum(z *[lanes]float64) float64 {
	y0, y1, y2, y3 := z[0]+z[4], z[1]+z[5], z[2]+z[6], z[3]+z[7]
	x0, x1 := y0+y2, y1+y3
	return x0 + x1
}

// fmaTail adds x[i]·y[i] into the lanes of acc for the last round of a
// kernel, whose lanes past the end multiply zeros (adding +0, which turns
// a −0 into +0).
func fmaTail(acc *[lanes]float64, x, y []float64) {
	for l := range acc {
		if l < len(x) {
			acc[l] = math.FMA(x[l], y[l], acc[l])
		} else {
			acc[l] += 0
		}
	}
}

// DotGo is Dot's twin: four accumulators of eight lanes over rounds of
// 32, the rest in rounds of eight into the first, the four added lane by
// lane, (a₀ + a₁) + (a₂ + a₃), and the lanes by hsum.
func DotGo(x, y []float64) float64 {
	y = y[:len(x)]
	var acc [4][lanes]float64
	i := 0
	for ; i+4*lanes <= len(x); i += 4 * lanes {
		for q := range acc {
			for l := range lanes {
				j := i + q*lanes + l
				acc[q][l] = math.FMA(x[j], y[j], acc[q][l])
			}
		}
	}
	for ; i < len(x); i += lanes {
		end := min(i+lanes, len(x))
		fmaTail(&acc[0], x[i:end], y[i:end])
	}
	var z [lanes]float64
	for l := range z {
		z[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l])
	}
	return hsum(&z)
}

// AxpyGo is Axpy's twin: y[j] = a·x[j] + y[j], fused.
func AxpyGo(a float64, x, y []float64) {
	x = x[:len(y)]
	for j := range y {
		y[j] = math.FMA(a, x[j], y[j])
	}
}

// Dot4Go is Dot4's twin: per row two accumulators of eight lanes over
// rounds of 16, the rest in rounds of eight into the first, the second
// added to the first lane by lane, and the lanes by hsum.
func Dot4Go(r0, r1, r2, r3, x []float64) (s0, s1, s2, s3 float64) {
	var out [4]float64
	for q, r := range [4][]float64{r0, r1, r2, r3} {
		r = r[:len(x)]
		var lo, hi [lanes]float64
		i := 0
		for ; i+2*lanes <= len(x); i += 2 * lanes {
			for l := range lanes {
				lo[l] = math.FMA(x[i+l], r[i+l], lo[l])
				hi[l] = math.FMA(x[i+lanes+l], r[i+lanes+l], hi[l])
			}
		}
		for ; i < len(x); i += lanes {
			end := min(i+lanes, len(x))
			fmaTail(&lo, x[i:end], r[i:end])
		}
		for l := range lo {
			lo[l] += hi[l]
		}
		out[q] = hsum(&lo)
	}
	return out[0], out[1], out[2], out[3]
}

// Axpy4Go is Axpy4's twin: y[j] plus a[0]·r0[j], then a[1]·r1[j], …,
// each fused.
func Axpy4Go(a *[4]float64, r0, r1, r2, r3, y []float64) {
	r0, r1, r2, r3 = r0[:len(y)], r1[:len(y)], r2[:len(y)], r3[:len(y)]
	for j := range y {
		v := math.FMA(a[0], r0[j], y[j])
		v = math.FMA(a[1], r1[j], v)
		v = math.FMA(a[2], r2[j], v)
		y[j] = math.FMA(a[3], r3[j], v)
	}
}

// RotGo is Rot's twin: r[j] = ac·r[j] + snc·x[j], then x[j] = c·x[j] −
// sn·r[j]. The conversions keep every product rounded on its own (Go may
// fuse a product into a sum otherwise).
func RotGo(ac, snc, c, sn float64, r, x []float64) {
	r = r[:len(x)] // one bounds check for the loop
	for j, xj := range x {
		v := float64(ac*r[j]) + float64(snc*xj)
		r[j] = v
		x[j] = float64(c*xj) - float64(sn*v)
	}
}
