// Package rbf is the Gaussian (RBF) kernel's rows: Row turns the products
// −2xᵀz of a row x and the landmarks z into exp(−γ‖x − z‖²).
//
// It owns the AVX2 and AVX-512 kernels that vectorise math.Exp's ordinary
// path (rbf_amd64.s) and their Go twin, RowGo (math.Exp element by
// element), whose bits they give: the Nyström features, and so every
// score, are the same on every processor (kernels_test.go, rbf_test.go).
// The tag noasm (or noasm_rbf, this package alone) leaves the assembly out
// and the twin runs.
package rbf
