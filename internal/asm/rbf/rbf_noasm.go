//go:build !amd64 || noasm || noasm_rbf

package rbf

// kernels is empty without the assembly (other processors, or the tags
// noasm and noasm_rbf): RowGo computes every row.
func kernels() []kernel { return nil }
