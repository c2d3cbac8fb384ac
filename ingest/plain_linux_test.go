package ingest

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// The loads under a mask read no byte past data: an array that ends
// where a page ends, before one that may not be read, decodes.
func TestScanArrayStopsAtTheEndOfData(t *testing.T) {
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := unix.Mprotect(mem[page:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	spec := arraySpec(t, 4)
	for _, tail := range []string{`]}`, `]`, ``, `,`} {
		for _, a := range []string{`[1,2,3,-4.5`, `[0.1,0.2,0.3,0.4`, `[1, 2, 3, 44444444444444444`} {
			msg := `{"id":1,"a":` + a + tail
			data := mem[page-len(msg) : page]
			copy(data, msg)
			decodeBoth(t, spec, data)
		}
	}
}
