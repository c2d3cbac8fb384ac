//go:build !amd64

package model

var wideLevel2Impls []level2Kernels
