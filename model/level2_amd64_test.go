package model

import "golang.org/x/sys/cpu"

// wideLevel2Impls are the wide kernels the processor runs, tested
// whichever dot, axpy and rot choose.
var wideLevel2Impls = func() []level2Kernels {
	if !cpu.X86.HasAVX512F {
		return nil
	}
	return []level2Kernels{{"avx512", dotAVX512, axpyAVX512, rotAVX512, dot4AVX512, axpy4AVX512}}
}()
