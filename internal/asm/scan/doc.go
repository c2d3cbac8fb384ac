// Package scan is the vector scan of JSON arrays of numbers: Array reads
// the plain numbers of an array many at a time, to strconv's bits.
//
// It owns the AVX-512 kernel (scan_amd64.s). Its Go twin is the caller's
// item-by-item parser (ingest's scanFloat): Array reads a prefix of the
// items, and without the kernel (other processors, or the tags noasm and
// noasm_scan) it reads none, so that the caller parses every item.
// scan_test.go holds what the kernel reads to strconv.ParseFloat's bits;
// ingest's decodeBoth tests hold the decoders with and without it to the
// same values.
package scan
