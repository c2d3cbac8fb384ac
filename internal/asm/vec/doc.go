// Package vec is the vector kernels of a learned fit's metric steps: the
// dot products and axpys of the triangular solves (one row, or four rows
// at once) and the Givens rotation of the factor updates.
//
// It owns their AVX2 kernels (vec_amd64.s) and their Go twins (DotGo,
// AxpyGo, RotGo, Dot4Go, Axpy4Go), which define the bits: each sums in
// the order of an eight-lane vector kernel, partial sums of fused
// multiply-adds added up in a fixed order, and the kernels do the same
// operations in the same order (two four-lane registers for eight lanes).
// A fit's bits, and so its model version, are then the same on every
// processor (vec_test.go holds every kernel to its twin's bits). The tag
// noasm (or noasm_vec, this package alone) leaves the assembly out and the
// twins run.
package vec
