//go:build amd64 && !noasm && !noasm_scan

package scan

import "golang.org/x/sys/cpu"

// arrayAVX512 is Array on AVX-512 (scan_amd64.s).
//
//go:noescape
func arrayAVX512(data []byte, i int, dst []float64, pow10 *[23]float64, pow10Mant0 *[2]uint64) (next, count int, closed bool)

// Enabled says whether Array reads anything: whether the processor runs
// arrayAVX512, AVX-512 with its byte instructions on 256-bit registers
// (BW, VL) and its byte compress and expand (VBMI2), BMI2's BZHI, SHRX
// and MULX, and POPCNT (every such processor also counts leading zeros,
// LZCNT).
var Enabled = cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VBMI2 &&
	cpu.X86.HasBMI1 && cpu.X86.HasBMI2 && cpu.X86.HasPOPCNT

// array is arrayAVX512.
func array(data []byte, i int, dst []float64, pow10 *[23]float64, pow10Mant0 *[2]uint64) (next, count int, closed bool) {
	return arrayAVX512(data, i, dst, pow10, pow10Mant0)
}
