package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/parquet-go/parquet-go"
)

// progressBar draws one status line on a terminal: a bar when the total
// is known, the count, the rate and the time left.
type progressBar struct {
	w     io.Writer
	label string
	unit  string
	total int64 // 0: unknown
	start time.Time

	mu       sync.Mutex
	drawn    time.Time
	done     int64
	finished bool
}

// redrawEvery bounds the redraws: a terminal does not need more.
const redrawEvery = 150 * time.Millisecond

// progress returns a bar for work of total units (0 when unknown), or nil
// when stderr is not a terminal: then only logs are written.
func (a *app) progress(label, unit string, total int64) *progressBar {
	if !a.tty {
		return nil
	}
	return &progressBar{w: a.stderr, label: label, unit: unit, total: total, start: time.Now()}
}

// set records that done units are finished, redrawing now and then. A nil
// bar does nothing, so callers need not check.
func (b *progressBar) set(done int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = done
	if now := time.Now(); now.Sub(b.drawn) >= redrawEvery {
		b.drawn = now
		b.draw(now)
	}
}

// setOf is set for work whose total becomes known as it goes.
func (b *progressBar) setOf(done, total int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.total = total
	b.mu.Unlock()
	b.set(done)
}

// rowsFunc adapts the bar to pipeline.Options.Progress (nil without a bar).
func (b *progressBar) rowsFunc() func(int64) {
	if b == nil {
		return nil
	}
	return b.set
}

// finish draws the final state and ends the line; later calls do nothing,
// so that it can also be deferred for the error paths.
func (b *progressBar) finish() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.finished = true
	b.draw(time.Now())
	fmt.Fprintln(b.w)
}

func (b *progressBar) draw(now time.Time) {
	fmt.Fprintf(b.w, "\r%s\x1b[K", b.line(now.Sub(b.start)))
}

// line renders the status after elapsed time.
func (b *progressBar) line(elapsed time.Duration) string {
	var s strings.Builder
	s.WriteString(b.label)
	rate := 0.0
	if elapsed > 0 {
		rate = float64(b.done) / elapsed.Seconds()
	}
	if b.total > 0 {
		frac := min(float64(b.done)/float64(b.total), 1)
		const width = 24
		filled := int(frac * width)
		fmt.Fprintf(&s, " [%s%s] %3.0f%% %s/%s %s", strings.Repeat("=", filled), strings.Repeat(" ", width-filled),
			100*frac, count(b.done), count(b.total), b.unit)
	} else {
		fmt.Fprintf(&s, " %s %s", count(b.done), b.unit)
	}
	fmt.Fprintf(&s, "  %s %s/s", count(int64(rate)), b.unit)
	switch {
	case b.total > 0 && rate > 0 && b.done < b.total:
		fmt.Fprintf(&s, "  ETA %s", (time.Duration(float64(b.total-b.done)/rate) * time.Second).Round(time.Second))
	default:
		fmt.Fprintf(&s, "  %s", elapsed.Round(100*time.Millisecond))
	}
	return s.String()
}

// count writes n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// estimateRows counts the data rows of the inputs for a progress bar's
// total: exactly from a Parquet footer, by counting lines of a plain CSV.
// It reports false when that is not possible cheaply (compressed CSV, a
// file that does not open): the bar then shows no total. ingest reports
// the real errors.
func estimateRows(patterns []string) (int64, bool) {
	var total int64
	for _, p := range patterns {
		files := []string{p}
		if strings.ContainsAny(p, `*?[\`) {
			var err error
			if files, err = filepath.Glob(p); err != nil {
				return 0, false
			}
		}
		for _, f := range files {
			n, err := fileRows(f)
			if err != nil {
				return 0, false
			}
			total += n
		}
	}
	return total, total > 0
}

var errNoCount = errors.New("rows cannot be counted cheaply")

func fileRows(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	lower := strings.ToLower(path)
	switch {
	case strings.HasSuffix(lower, ".parquet"), strings.HasSuffix(lower, ".pq"):
		info, err := f.Stat()
		if err != nil {
			return 0, err
		}
		pf, err := parquet.OpenFile(f, info.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
		if err != nil {
			return 0, err
		}
		return pf.NumRows(), nil
	case strings.HasSuffix(lower, ".csv"):
		// Lines less the header: quoted line breaks make it an estimate.
		var lines int64
		buf := make([]byte, 1<<20)
		for {
			n, err := f.Read(buf)
			lines += int64(bytes.Count(buf[:n], []byte{'\n'}))
			if errors.Is(err, io.EOF) {
				return max(lines-1, 0), nil
			}
			if err != nil {
				return 0, err
			}
		}
	}
	return 0, errNoCount
}
