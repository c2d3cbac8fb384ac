// Package dd is the double-double sums of a streamed training's statistics:
// Axpy and Axpy8 add products to sums held as a rounded value and its
// exact error, and Add merges two such sums.
//
// It owns the AVX2 and AVX-512 kernels of those sums (dd_amd64.s) and
// their Go twins, AxpyGo and AddGo, which define their bits: a model's version
// hashes the sums, so every kernel gives the twin's bits, on every
// processor (dd_test.go). The tag noasm (or noasm_dd, this package alone)
// leaves the assembly out and the twin runs.
package dd
