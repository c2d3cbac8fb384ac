package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

	"github.com/apache/arrow/go/v15/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/arrowalloc"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/rows"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// OnError says what Score does with a bad input row: one that does not
// decode, that has a NaN or ±Inf feature, or whose score is not a finite
// number (values too large for the model).
type OnError string

const (
	// OnErrorFail stops the job at the first bad row, naming its file,
	// row and column; no output file is left behind.
	OnErrorFail OnError = "fail"
	// OnErrorSkip writes bad rows to the rejects file and goes on.
	OnErrorSkip OnError = "skip"
)

// ParseOnError reads an OnError name.
func ParseOnError(s string) (OnError, error) {
	switch e := OnError(s); e {
	case OnErrorFail, OnErrorSkip:
		return e, nil
	}
	return "", fmt.Errorf("on-error %q: want %s or %s", s, OnErrorFail, OnErrorSkip)
}

// ScoreConfig describes a batch scoring job.
type ScoreConfig struct {
	Model *model.Model
	// ModelFile, when set, is the file Model was read from: no output may
	// replace it.
	ModelFile string
	// Inputs are files or glob patterns, read in order with the model's
	// view spec.
	Inputs []string
	// Output is a .parquet/.pq or .jsonl/.ndjson file, or sink.Stdout for
	// JSON Lines on Stdout. A file appears only when the job succeeds.
	Output string
	// Stdout receives the rows when Output is sink.Stdout; nil means
	// os.Stdout.
	Stdout io.Writer
	// Parquet sets how a Parquet output is written.
	Parquet sink.ParquetOptions
	// Contributions adds each view's share of the decision to every row.
	Contributions bool
	// OnError is OnErrorFail (the default when empty) or OnErrorSkip.
	OnError OnError
	// Rejects is the JSON Lines file that receives the rows skipped under
	// OnErrorSkip, one schemas.RowError each; required with OnErrorSkip.
	Rejects string
	// Workers is the number of scoring goroutines, each with its own
	// model.Scorer; 0 means GOMAXPROCS.
	Workers int
	// QueueDepth bounds the batches in flight between reading and
	// writing (read, being scored, or waiting for their turn to be
	// written), so memory is about QueueDepth × BatchSize rows whatever
	// the size of the inputs; 0 means 2 × Workers.
	QueueDepth int
	Options
}

// Counts account for every input row a scoring job read: In == Scored +
// Rejected + NotWritten always holds, also when the job stops early.
type Counts struct {
	// In counts the input rows read, decoded or not.
	In int64 `json:"in"`
	// Scored counts the rows written to the output.
	Scored int64 `json:"scored"`
	// Rejected counts the bad rows written to the rejects file.
	Rejected int64 `json:"rejected"`
	// NotWritten counts the rows read but in no output when the job
	// stopped: those of the batch it stopped at and of the batches in
	// flight, and, as a failed job's output file is discarded, those
	// scored into it. It is 0 when the job succeeds.
	NotWritten int64 `json:"not_written"`
}

// withOutputDiscarded moves the rows of a discarded output file to
// NotWritten.
func (c Counts) withOutputDiscarded() Counts {
	c.NotWritten += c.Scored
	c.Scored = 0
	return c
}

func (c ScoreConfig) resolve() (ScoreConfig, error) {
	if c.Model == nil {
		return c, errors.New("no model to score with")
	}
	if c.Output == "" {
		return c, errors.New("no output")
	}
	if c.OnError == "" {
		c.OnError = OnErrorFail
	}
	if _, err := ParseOnError(string(c.OnError)); err != nil {
		return c, err
	}
	if c.OnError == OnErrorSkip && c.Rejects == "" {
		return c, errors.New("skipping bad rows needs a rejects file")
	}
	switch {
	case c.Workers < 0:
		return c, fmt.Errorf("%d workers", c.Workers)
	case c.Workers == 0:
		c.Workers = runtime.GOMAXPROCS(0)
	}
	switch {
	case c.QueueDepth < 0:
		return c, fmt.Errorf("queue depth %d", c.QueueDepth)
	case c.QueueDepth == 0:
		c.QueueDepth = 2 * c.Workers
	}
	c.Options = c.Options.WithDefaults()
	return c, nil
}

// scoreRecycleBytes bounds what a scoring job keeps of released batches'
// buffers for the next ones: a few batches of 4096 rows of 3 × 64
// features with their outputs (about 7 MiB each).
const scoreRecycleBytes = 64 << 20

// Score streams the inputs through the model into the output: one reader,
// Workers scoring goroutines and one writer that restores input order.
// Before it reads a row it refuses an output or rejects file that is one
// of the inputs, the model file or each other, or that cannot be created
// (CheckFiles).
// Every goroutine stops when ctx is cancelled or another fails, and every
// Arrow record is released on every path. The counts say how far the job
// got, also when it returns an error.
func Score(ctx context.Context, cfg ScoreConfig) (Counts, error) {
	if cfg.Allocator == nil {
		// The job allocates the same few megabytes for every batch: hand
		// a released batch's buffers to the next, cleared as a Go
		// allocation is.
		recycled := arrowalloc.New(nil, arrowalloc.Options{MaxBytes: scoreRecycleBytes, Zero: true})
		defer recycled.Close()
		cfg.Allocator = recycled
	}
	cfg, err := cfg.resolve()
	if err != nil {
		return Counts{}, err
	}
	if err := cfg.checkFiles(); err != nil {
		return Counts{}, err
	}
	m := cfg.Model
	src, err := ingest.Open(ctx, m.Spec, cfg.Inputs, cfg.IngestOptions(false))
	if err != nil {
		return Counts{}, err
	}
	schema := schemas.OutputSchema(m.Outputs(), len(m.Spec.Views), cfg.Contributions)
	out, err := createOutput(cfg.Output, cfg.Stdout, schema, cfg.Parquet)
	if err != nil {
		return Counts{}, errors.Join(err, src.Close())
	}
	var rejects *rejectsFile
	if cfg.OnError == OnErrorSkip {
		if rejects, err = createRejects(cfg.Rejects); err != nil {
			return Counts{}, errors.Join(err, src.Close(), out.discard())
		}
	}
	job := &scoreJob{cfg: cfg, src: src, out: out, rejects: rejects, schema: schema}
	counts, err := job.run(ctx)
	if cerr := src.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close inputs: %w", cerr))
	}
	if rejects != nil {
		err = errors.Join(err, rejects.close())
	}
	if err != nil {
		if cfg.Output != sink.Stdout {
			counts = counts.withOutputDiscarded()
		}
		return counts, errors.Join(err, out.discard())
	}
	if err := out.commit(ctx); err != nil {
		if cfg.Output != sink.Stdout {
			counts = counts.withOutputDiscarded()
		}
		return counts, err
	}
	cfg.Logger.Info("scored", "in", counts.In, "scored", counts.Scored, "rejected", counts.Rejected, "output", out.name)
	return counts, nil
}

type scoreJob struct {
	cfg     ScoreConfig
	src     ingest.Source
	out     *output
	rejects *rejectsFile
	schema  *arrow.Schema
}

// inputBatch is a batch with its position in the input.
type inputBatch struct {
	seq int64
	ingest.Batch
}

// scoredBatch is what the writer needs of a batch: its scores (nil when no
// row survived) and its bad rows in input order.
type scoredBatch struct {
	seq    int64
	in     int64
	scores arrow.Record
	bad    []schemas.RowError
}

func (s *scoredBatch) release() {
	if s.scores != nil {
		s.scores.Release()
	}
}

func (j *scoreJob) run(ctx context.Context) (Counts, error) {
	g, ctx := errgroup.WithContext(ctx)
	// A slot is taken before a batch is read and given back once it is
	// written: this, not the channel buffers, bounds the batches in
	// flight, including those the writer holds back to restore order.
	slots := make(chan struct{}, j.cfg.QueueDepth)
	// Unbuffered, so no batch is ever stranded in the channel on
	// cancellation; results has room for every batch in flight, so a
	// worker never waits on the writer.
	batches := make(chan inputBatch)
	results := make(chan scoredBatch, j.cfg.QueueDepth)

	var read int64
	g.Go(func() error { return j.read(ctx, slots, batches, &read) })
	var workers sync.WaitGroup
	for range j.cfg.Workers {
		workers.Go(func() { j.score(ctx, batches, results) })
	}
	g.Go(func() error {
		workers.Wait()
		close(results)
		return nil
	})
	var counts Counts
	g.Go(func() (err error) {
		counts, err = j.write(ctx, slots, results)
		return err
	})
	err := g.Wait()
	// Results the writer did not take (after a failure) still own records.
	for r := range results {
		r.release()
	}
	// The writer counted the rows of the batches it wrote; the reader
	// may have read more before the job stopped.
	counts.NotWritten = read - counts.In
	counts.In = read
	return counts, err
}

// read feeds the workers in input order, counting the rows it read.
func (j *scoreJob) read(ctx context.Context, slots chan<- struct{}, batches chan<- inputBatch, rows *int64) error {
	defer close(batches)
	for seq := int64(0); ; seq++ {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		b, err := j.src.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		*rows += int64(len(b.Rows) + len(b.Rejects))
		select {
		case batches <- inputBatch{seq: seq, Batch: b}:
		case <-ctx.Done():
			b.Record.Release()
			return ctx.Err()
		}
	}
}

// score turns batches into output records with its own Scorer and
// buffers. It stops when the reader closes batches; on cancellation it
// keeps taking batches, unscored, so that the reader is never stuck
// holding one.
func (j *scoreJob) score(ctx context.Context, batches <-chan inputBatch, results chan<- scoredBatch) {
	s := rows.NewScorer(j.cfg.Model, j.schema, j.cfg.Allocator)
	for b := range batches {
		r := j.scoreBatch(s, b)
		select {
		case results <- r:
		case <-ctx.Done():
			r.release()
			for b := range batches {
				b.Record.Release()
			}
			return
		}
	}
}

func (j *scoreJob) scoreBatch(s *rows.Scorer, b inputBatch) scoredBatch {
	defer b.Record.Release()
	r := scoredBatch{seq: b.seq, in: int64(len(b.Rows) + len(b.Rejects))}
	var skip []bool
	r.bad, skip = rows.Bad(j.cfg.Model.Spec, b.Batch, false)
	if j.cfg.OnError == OnErrorFail && len(r.bad) > 0 {
		return r // the writer stops the job here; scoring would be wasted
	}
	var unscorable []schemas.RowError
	r.scores, unscorable, _ = s.Score(b.Batch, skip, false)
	r.bad = rows.Merge(r.bad, unscorable)
	return r
}

// write takes scored batches in any order and writes them in input order.
func (j *scoreJob) write(ctx context.Context, slots <-chan struct{}, results <-chan scoredBatch) (Counts, error) {
	var counts Counts
	waiting := make(map[int64]scoredBatch)
	defer func() {
		for _, r := range waiting {
			r.release()
		}
	}()
	next := int64(0)
	for {
		select {
		case r, ok := <-results:
			if !ok {
				return counts, nil
			}
			waiting[r.seq] = r
		case <-ctx.Done():
			return counts, ctx.Err()
		}
		for {
			r, ok := waiting[next]
			if !ok {
				break
			}
			delete(waiting, next)
			err := j.writeBatch(ctx, r, &counts)
			r.release()
			if err != nil {
				return counts, err
			}
			<-slots
			next++
			j.cfg.Progress(counts.In)
		}
	}
}

func (j *scoreJob) writeBatch(ctx context.Context, r scoredBatch, counts *Counts) error {
	if len(r.bad) > 0 {
		if j.rejects == nil {
			return &r.bad[0]
		}
		if err := j.rejects.Write(r.bad...); err != nil {
			return err
		}
	}
	var scored int64
	if r.scores != nil {
		scored = r.scores.NumRows()
		if err := j.out.Write(ctx, r.scores); err != nil {
			return err
		}
	}
	counts.In += r.in
	counts.Scored += scored
	counts.Rejected += int64(len(r.bad))
	return nil
}

// rejectsFile is the JSON Lines file of skipped rows.
type rejectsFile struct {
	*sink.Rejects
	file *os.File
}

func createRejects(path string) (*rejectsFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("rejects file: %w", err)
	}
	return &rejectsFile{Rejects: sink.NewRejects(f), file: f}, nil
}

func (r *rejectsFile) close() error {
	if err := errors.Join(r.Rejects.Close(context.Background()), r.file.Close()); err != nil {
		return fmt.Errorf("rejects file %s: %w", r.file.Name(), err)
	}
	return nil
}
