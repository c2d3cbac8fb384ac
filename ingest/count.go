package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// ErrNotCounted marks an input whose rows CountRows cannot count without
// decoding it: a gzip-compressed CSV file.
var ErrNotCounted = errors.New("rows cannot be counted without decompressing the file")

// Files returns the files that Open reads for patterns, in the order it
// reads them: globs expanded, every file existing and of a known type,
// each file once. It reads no file, so a job can check its outputs
// against its inputs before it starts.
func Files(patterns []string) ([]string, error) {
	return expand(patterns)
}

// CountRows returns the number of data rows of the files named by patterns
// (as Open expands them) without decoding any row: a Parquet file's count
// comes from its footer, read with the guards Open uses against malformed
// footers; a plain CSV file's is its number of lines after the header,
// which counts a quoted cell spanning lines once per line. A gzip-compressed
// CSV file gives an error wrapping ErrNotCounted. It is meant for progress
// reports: a file it counts may still fail when it is read.
func CountRows(ctx context.Context, patterns []string) (int64, error) {
	files, err := expand(patterns)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, name := range files {
		n, err := countFile(ctx, name)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func countFile(ctx context.Context, name string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("ingest: counting %s: %w", name, err)
	}
	kind, _ := formatOf(name)
	if kind == formatCSV && strings.HasSuffix(strings.ToLower(name), ".gz") {
		return 0, fileErr(name, -1, "", ErrNotCounted)
	}
	f, err := os.Open(name)
	if err != nil {
		return 0, fmt.Errorf("ingest: %w", err)
	}
	defer f.Close()
	if kind == formatParquet {
		return countParquet(f, name)
	}
	return countLines(ctx, f, name)
}

// countParquet reads the row count of a Parquet file's footer after the
// checks that keep parquet-go from allocating what a corrupt footer claims
// or panicking on it.
func countParquet(f *os.File, name string) (int64, error) {
	info, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("ingest: %w", err)
	}
	size := info.Size()
	footerLen, err := checkFooter(f, size)
	if err == nil {
		err = checkFooterEncoding(f, size, footerLen)
	}
	var rows int64
	if err == nil {
		err = guard(func() error {
			pf, err := parquet.OpenFile(f, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
			if err != nil {
				return err
			}
			rows = pf.NumRows()
			return nil
		})
	}
	if err == nil && rows < 0 {
		err = fmt.Errorf("%w: the footer claims %d rows", errMalformed, rows)
	}
	if err != nil {
		return 0, fileErr(name, -1, "", err)
	}
	return rows, nil
}

// countLines counts the lines of a plain CSV file less its header; a last
// line without a line break counts.
func countLines(ctx context.Context, r io.Reader, name string) (int64, error) {
	var lines int64
	last := byte('\n')
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("ingest: counting %s: %w", name, err)
		}
		n, err := r.Read(buf)
		if n > 0 {
			lines += int64(bytes.Count(buf[:n], []byte{'\n'}))
			last = buf[n-1]
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fileErr(name, -1, "", err)
		}
	}
	if last != '\n' {
		lines++
	}
	return max(lines-1, 0), nil
}
