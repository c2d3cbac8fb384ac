package ingest

import (
	"fmt"

	"github.com/parquet-go/parquet-go/encoding"
)

type valueKind uint8

const (
	valsFloat valueKind = iota + 1
	valsDouble
	valsInt32
	valsInt64
	valsUint32
	valsUint64
	valsDict
)

// pageValues are the non-null values of one page in their stored type
// (converted while copied into the batch, never staged), or dictionary
// indexes into the column chunk's converted dictionary.
type pageValues struct {
	kind       valueKind
	n          int
	f32        []float32
	f64        []float64
	i32        []int32
	i64        []int64
	u32        []uint32
	u64        []uint64
	idx        []int32
	dictFloats []float64
	dictInts   []int64
}

// set points v at data. Integer columns may be unsigned; the id column
// (integer) must hold integers.
func (v *pageValues) set(data encoding.Values, unsigned, integer bool) error {
	switch kind := data.Kind(); {
	case kind == encoding.Int32 && unsigned:
		v.u32 = data.Uint32()
		v.kind, v.n = valsUint32, len(v.u32)
	case kind == encoding.Int32:
		v.i32 = data.Int32()
		v.kind, v.n = valsInt32, len(v.i32)
	case kind == encoding.Int64 && unsigned:
		v.u64 = data.Uint64()
		v.kind, v.n = valsUint64, len(v.u64)
	case kind == encoding.Int64:
		v.i64 = data.Int64()
		v.kind, v.n = valsInt64, len(v.i64)
	case kind == encoding.Float && !integer:
		v.f32 = data.Float()
		v.kind, v.n = valsFloat, len(v.f32)
	case kind == encoding.Double && !integer:
		v.f64 = data.Double()
		v.kind, v.n = valsDouble, len(v.f64)
	default:
		return fmt.Errorf("%w: page of %s values", errMalformed, kind)
	}
	return nil
}

type number interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint32 | ~uint64
}

// scatter writes src converted to float64 to dst[0], dst[stride], ...
func scatter[T number](dst []float64, stride int, src []T) {
	if stride == 1 {
		dst = dst[:len(src)]
		for k, x := range src {
			dst[k] = float64(x)
		}
		return
	}
	j := 0
	for _, x := range src {
		dst[j] = float64(x)
		j += stride
	}
}

// gather is scatter for dictionary indexes, already checked to be in range.
func gather(dst []float64, stride int, idx []int32, table []float64) {
	j := 0
	for _, i := range idx {
		dst[j] = table[i]
		j += stride
	}
}

// scatter writes values [from, from+n) to dst[0], dst[stride], ...
func (v *pageValues) scatter(dst []float64, stride, from, n int) {
	switch v.kind {
	case valsFloat:
		scatter(dst, stride, v.f32[from:from+n])
	case valsDouble:
		scatter(dst, stride, v.f64[from:from+n])
	case valsInt32:
		scatter(dst, stride, v.i32[from:from+n])
	case valsInt64:
		scatter(dst, stride, v.i64[from:from+n])
	case valsUint32:
		scatter(dst, stride, v.u32[from:from+n])
	case valsUint64:
		scatter(dst, stride, v.u64[from:from+n])
	case valsDict:
		gather(dst, stride, v.idx[from:from+n], v.dictFloats)
	}
}

// at is value i as a float64.
func (v *pageValues) at(i int) float64 {
	var x [1]float64
	v.scatter(x[:], 1, i, 1)
	return x[0]
}

// ints copies values [from, from+len(dst)) of an integer column to dst.
func (v *pageValues) ints(dst []int64, from int) {
	n := len(dst)
	switch v.kind {
	case valsInt32:
		for k, x := range v.i32[from : from+n] {
			dst[k] = int64(x)
		}
	case valsInt64:
		copy(dst, v.i64[from:from+n])
	case valsUint32:
		for k, x := range v.u32[from : from+n] {
			dst[k] = int64(x)
		}
	case valsUint64:
		for k, x := range v.u64[from : from+n] {
			dst[k] = int64(x)
		}
	case valsDict:
		for k, i := range v.idx[from : from+n] {
			dst[k] = v.dictInts[i]
		}
	}
}
