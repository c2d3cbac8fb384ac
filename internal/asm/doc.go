// Package asm holds mvml's hand-written kernels, a package each by kind,
// as gonum's internal/asm does: every assembly file of the module is here.
//
//   - gemm: Dgemm's micro-kernels and packing (AVX-512, AVX2); twin: gonum's Dgemm.
//   - dd: the double-double sums of the streamed statistics (AVX-512,
//     AVX2); twin: dd.AxpyGo.
//   - rbf: the Gaussian kernel's exp over a row (AVX-512, AVX2); twin:
//     rbf.RowGo, math.Exp element by element.
//   - vec: the learned fit's metric steps: dot products, axpys (one row or
//     four) and Givens rotations (AVX2); twins: vec.DotGo and the others.
//   - scan: JSON arrays of plain numbers (AVX-512 VBMI2); twin: the
//     caller's item-by-item parser, which reads what scan leaves.
//
// Each kernel gives its twin's bits: a model's version hashes sums and
// features that the kernels compute, so that bit-exactness is what lets
// replicas on different processors serve the same version. Each package
// tests it, kernel against twin on tables and fuzz input, and runs its
// tests in both builds: the assembly files carry the constraint
// amd64 && !noasm && !noasm_<package>, their twins the opposite, so that
// -tags noasm runs every twin (and gonum's pure-Go kernels, which honour
// the same tag) and -tags noasm_<package> leaves one package's assembly
// out, to measure its share.
package asm
