package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/pipeline/serve"
)

// progress tells the user how far a long job has got: on a terminal, a
// status line redrawn in place (a bar when the total is known, the count,
// the rate and the time left); otherwise a log line every
// app.progressEvery, so that a job run by a scheduler shows it is alive
// even while its count does not move.
type progress struct {
	label string
	unit  string // "" for work that is not counted: only the time is shown
	start time.Time
	bar   io.Writer    // the terminal, or nil
	log   *slog.Logger // without a terminal

	mu       sync.Mutex
	drawn    time.Time
	done     int64
	total    int64 // 0: unknown
	attrs    []any // more to log, such as the folds done
	finished bool

	stop    chan struct{} // ends the logging goroutine
	stopped chan struct{}
}

// redrawEvery bounds the redraws: a terminal does not need more.
const redrawEvery = 150 * time.Millisecond

// progress starts reporting on work of total units (0 when unknown). Its
// finish must be called, also on error paths.
func (a *app) progress(label, unit string, total int64) *progress {
	p := &progress{label: label, unit: unit, total: total, start: time.Now()}
	if a.tty {
		p.bar = a.stderr
		return p
	}
	p.log = a.log
	p.stop, p.stopped = make(chan struct{}), make(chan struct{})
	go p.logEvery(a.progressEvery)
	return p
}

func (p *progress) logEvery(every time.Duration) {
	defer close(p.stopped)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-tick.C:
			p.mu.Lock()
			args := p.logArgs(now.Sub(p.start))
			p.mu.Unlock()
			p.log.Info(p.label, args...)
		}
	}
}

// logArgs are the attributes of a progress log line.
func (p *progress) logArgs(elapsed time.Duration) []any {
	var args []any
	if p.unit != "" {
		args = append(args, p.unit, p.done)
		if p.total > 0 {
			args = append(args, "of", p.total)
		}
		args = append(args, p.unit+"_per_s", int64(rate(p.done, elapsed)))
	}
	args = append(args, p.attrs...)
	args = append(args, "elapsed", elapsed.Round(time.Second).String())
	if eta, ok := p.eta(elapsed); ok {
		args = append(args, "eta", eta.String())
	}
	return args
}

// set records that done units are finished, redrawing a terminal's line
// now and then. A nil progress does nothing, so callers need not check.
func (p *progress) set(done int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	p.done = done
	if now := time.Now(); p.bar != nil && now.Sub(p.drawn) >= redrawEvery {
		p.drawn = now
		p.draw(now)
	}
}

// setOf is set for work whose total becomes known as it goes.
func (p *progress) setOf(done, total int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.total = total
	p.mu.Unlock()
	p.set(done)
}

// with adds attributes to the log lines from now on (key, value pairs,
// as slog takes them).
func (p *progress) with(attrs ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.attrs = attrs
	p.mu.Unlock()
}

// rowsFunc adapts the progress to pipeline.Options.Progress.
func (p *progress) rowsFunc() func(int64) {
	if p == nil {
		return nil
	}
	return p.set
}

// finish draws a terminal's final state and ends the line, or stops the
// log lines; later calls do nothing, so that it can also be deferred for
// the error paths.
func (p *progress) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.finished {
		p.mu.Unlock()
		return
	}
	p.finished = true
	if p.bar != nil {
		p.draw(time.Now())
		fmt.Fprintln(p.bar)
	}
	p.mu.Unlock()
	if p.stop != nil {
		close(p.stop)
		<-p.stopped
	}
}

func (p *progress) draw(now time.Time) {
	fmt.Fprintf(p.bar, "\r%s\x1b[K", p.line(now.Sub(p.start)))
}

// line renders the status after elapsed time.
func (p *progress) line(elapsed time.Duration) string {
	var s strings.Builder
	s.WriteString(p.label)
	if p.unit != "" {
		if p.total > 0 {
			frac := min(float64(p.done)/float64(p.total), 1)
			const width = 24
			filled := int(frac * width)
			fmt.Fprintf(&s, " [%s%s] %3.0f%% %s/%s %s", strings.Repeat("=", filled), strings.Repeat(" ", width-filled),
				100*frac, count(p.done), count(p.total), p.unit)
		} else {
			fmt.Fprintf(&s, " %s %s", count(p.done), p.unit)
		}
		fmt.Fprintf(&s, "  %s %s/s", count(int64(rate(p.done, elapsed))), p.unit)
	}
	if eta, ok := p.eta(elapsed); ok {
		fmt.Fprintf(&s, "  ETA %s", eta)
	} else {
		fmt.Fprintf(&s, "  %s", elapsed.Round(100*time.Millisecond))
	}
	return s.String()
}

func rate(done int64, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(done) / elapsed.Seconds()
}

// eta is the time left at the rate so far, when it can be told.
func (p *progress) eta(elapsed time.Duration) (time.Duration, bool) {
	r := rate(p.done, elapsed)
	if p.total <= 0 || r <= 0 || p.done >= p.total {
		return 0, false
	}
	return (time.Duration(float64(p.total-p.done)/r) * time.Second).Round(time.Second), true
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

// totalRows is the row count a progress bar shows: the inputs' rows as
// ingest counts them without decoding them, or 0 (no total) without a
// terminal, where nobody sees a bar, or when they cannot be counted so:
// reading them reports the real errors.
func (a *app) totalRows(ctx context.Context, inputs []string) int64 {
	if !a.tty {
		return 0
	}
	n, err := ingest.CountRows(ctx, inputs)
	if err != nil {
		a.log.Debug("no total for the progress bar", "err", err)
		return 0
	}
	return n
}

// serveProgress reports a running service until stop is called: on a
// terminal a status line of the records taken, otherwise a log line every
// app.progressEvery with the records taken, scored, dead-lettered and not
// committed, the lag of the partitions owned and the model in service.
func (a *app) serveProgress(svc *serve.Service) (stop func()) {
	p := a.progress("serve", "rows", 0)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(min(a.progressEvery, time.Second))
		defer tick.Stop()
		for {
			st := svc.Stats()
			var lag int64
			for _, part := range st.Partitions {
				if part.Owned {
					lag += part.Lag
				}
			}
			p.with("scored", st.Scored, "dead_lettered", st.DeadLettered, "not_committed", st.NotCommitted, "lag", lag,
				"model_version", st.ModelVersion)
			p.set(st.In)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		p.finish()
	}
}
