// Package transform owns the kernels of mvml and the block-Nyström feature
// map on fixed landmarks (DESIGN.md §2).
//
// Every view l has a kernel k_l (Kernel, resolved from a schemas.KernelSpec by
// ResolveKernel). Fit draws ONE seeded set of p landmark rows, shared by all
// views, and builds one ViewMap per view: with W_l = k_l(Z_l, Z_l) = VΛVᵀ and
// the r_l eigenvalues above a relative tolerance kept, the reduced map is
//
//	u_l(x) = Λ_r^{-1/2} V_rᵀ k_l(Z_l, x) ∈ R^{r_l},
//
// stored as Proj = V_r Λ_r^{-1/2} (p×r_l), so that U_l = K_l(X, Z_l)·Proj and
// U_l U_lᵀ = K_{XZ} W_l⁺ K_{ZX}, the Nyström approximation of the view's kernel
// matrix. Eigenvalues at or below the tolerance (tiny or negative ones) are
// dropped, never raised to −½, so a rank-deficient W only lowers r_l.
//
// Kernel matrices against landmarks are computed in blocks of rows with one
// matrix product per block (‖x‖² + ‖z‖² − 2xᵀz for the Gaussian kernel) and
// the blocks are spread over GOMAXPROCS goroutines. The products are plain
// NoTrans·NoTrans Dgemm calls, whose per-element summation order does not
// depend on how rows are split, so a row's features are bit-identical
// whatever the batch it arrives in and whatever the number of workers —
// with gonum's pure-Go BLAS, and with the default build's assembly Dgemm
// (internal/blasimpl), which sums in gonum's order. The Gaussian kernel's
// exp is math.Exp's own computation on 8 or 4 lanes at a time where the
// processor has AVX-512 or AVX2 and FMA (amd64), so its values are
// math.Exp's to the bit in every build. An optimized BLAS behind gonum (the
// commands' build tag openblas, see internal/blasimpl) chooses its kernels
// by shape and fuses multiply-adds: its results agree with these to
// rounding (1e-10 relative), not bit for bit.
//
// A training that reads more rows than it can hold fits the feature maps
// on a Reservoir: a seeded uniform sample of its stream of rows.
//
// The package is pure computation on gonum matrices: no files, topics,
// clocks or global state. Inputs are never written to, so a mat.Dense built
// over schemas.ViewValues (an Arrow buffer) can be passed without copying.
package transform
