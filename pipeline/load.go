package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/rows"
	"github.com/mvml/mvml/schemas"
)

// SourceFunc opens a Source over a fixed set of rows. Every call must
// yield the same rows: a streamed training reads them twice.
type SourceFunc func(ctx context.Context, opts ingest.Options) (ingest.Source, error)

// FileSource is the SourceFunc of files or glob patterns read with spec.
func FileSource(spec *schemas.ViewSpec, patterns []string) SourceFunc {
	return func(ctx context.Context, opts ingest.Options) (ingest.Source, error) {
		return ingest.Open(ctx, spec, patterns, opts)
	}
}

// LoadLabelled reads every row of inputs (files or glob patterns) into
// memory for training or evaluation: views[l] is n×d_l in input order and
// labels holds the n labels. Training needs clean data, so a row that does
// not decode, a NaN or ±Inf feature and a missing or non-finite label are
// errors naming the file, row and column.
func LoadLabelled(ctx context.Context, spec *schemas.ViewSpec, inputs []string, opts Options) ([]*mat.Dense, []float64, error) {
	views, labels, err := LoadLabelledFrom(ctx, spec, FileSource(spec, inputs), opts)
	if errors.Is(err, errNoRows) {
		err = fmt.Errorf("%w: %s", err, strings.Join(inputs, " "))
	}
	return views, labels, err
}

// LoadLabelledFrom is LoadLabelled for the rows of any source, such as a
// time range of a Kafka topic.
func LoadLabelledFrom(ctx context.Context, spec *schemas.ViewSpec, open SourceFunc, opts Options) ([]*mat.Dense, []float64, error) {
	views, labels, _, _, err := loadLabelled(ctx, spec, open, opts)
	return views, labels, err
}

// origin is where a row is in the inputs.
type origin struct {
	source string
	row    int64
}

// loadLabelled is LoadLabelledFrom that also says where every row came
// from, so that an error about a row of the matrices can name it in the
// inputs (locateRow), and its record id.
func loadLabelled(ctx context.Context, spec *schemas.ViewSpec, open SourceFunc, opts Options) ([]*mat.Dense, []float64, []origin, []int64, error) {
	return loadLabelledUpTo(ctx, spec, open, opts, 0)
}

// holdExceeded is loadLabelledUpTo's error once the rows held would take
// more than its bound.
type holdExceeded struct {
	rows, bytes int64
}

func (e *holdExceeded) Error() string {
	return fmt.Sprintf("more than %d rows (%s) to hold", e.rows, Bytes(e.bytes))
}

// heldBytes is what rows rows of dims values take when held (see
// EstimateTrain): every value twice while the slices grow, the label and
// where the row came from.
func heldBytes(rows int64, dims int) int64 {
	return rows * (16*int64(dims) + heldRowBytes)
}

// loadLabelledUpTo is loadLabelled stopping with a *holdExceeded once the
// rows held would take more than maxBytes (0: no bound), for inputs
// whose rows could not be counted before.
func loadLabelledUpTo(ctx context.Context, spec *schemas.ViewSpec, open SourceFunc, opts Options, maxBytes int64) ([]*mat.Dense, []float64, []origin, []int64, error) {
	opts = opts.WithDefaults()
	dims := 0
	for _, d := range spec.Dims() {
		dims += d
	}
	values := make([][]float64, len(spec.Views))
	var labels []float64
	var origins []origin
	var ids []int64
	err := eachLabelled(ctx, spec, open, opts, func(b ingest.Batch) error {
		labels = append(labels, schemas.Labels(b.Record).Float64Values()...)
		ids = append(ids, schemas.IDs(b.Record).Int64Values()...)
		for l := range values {
			v, _ := schemas.ViewValues(b.Record, l)
			values[l] = append(values[l], v...)
		}
		for i, r := range b.Rows {
			origins = append(origins, origin{b.RowSource(i), r})
		}
		if held := heldBytes(int64(len(labels)), dims); maxBytes > 0 && held > maxBytes {
			return &holdExceeded{rows: int64(len(labels)), bytes: held}
		}
		return nil
	})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	n := len(labels)
	if n == 0 {
		return nil, nil, nil, nil, errNoRows
	}
	views := make([]*mat.Dense, len(values))
	for l, v := range values {
		views[l] = mat.NewDense(n, spec.Views[l].Dimension(), v)
	}
	opts.Logger.Info("loaded labelled rows", "rows", n, "views", len(views))
	return views, labels, origins, ids, nil
}

// batchOrigins says where the rows of b's record came from.
func batchOrigins(b ingest.Batch) []origin {
	rows := make([]origin, len(b.Rows))
	for i, r := range b.Rows {
		rows[i] = origin{b.RowSource(i), r}
	}
	return rows
}

// locateRow returns err, or, when err holds a *schemas.RowError that the
// model reported by the index of a row it was given (it has no Source yet),
// that row error located in the inputs, rows[i] being where row i came
// from: the layers between say nothing the row error does not, and their
// messages were written with the index.
func locateRow(err error, rows []origin) error {
	var re *schemas.RowError
	if !errors.As(err, &re) || re.Source != "" || re.Row < 0 || re.Row >= int64(len(rows)) {
		return err
	}
	located := *re
	located.Source, located.Row = rows[re.Row].source, rows[re.Row].row
	return &located
}

// errNoRows is the error of inputs without a single row.
var errNoRows = errors.New("the inputs hold no rows")

// PredictLabelled scores the labelled rows of inputs with m, batch by
// batch, and returns their true labels and the model's predictions in input
// order. Like LoadLabelled it refuses bad rows, since a metric over a
// silently filtered set would mislead; unlike it, it keeps only two numbers
// per row in memory.
func PredictLabelled(ctx context.Context, m *model.Model, inputs []string, opts Options) (truth, pred []float64, err error) {
	opts = opts.WithDefaults()
	scorer := m.NewScorer()
	var dec mat.Dense
	nViews := len(m.Spec.Views)
	err = eachLabelled(ctx, m.Spec, FileSource(m.Spec, inputs), opts, func(b ingest.Batch) error {
		rec := b.Record
		n := int(rec.NumRows())
		start := len(pred)
		pred = slices.Grow(pred, n)[:start+n]
		// A metric over a NaN would be NaN: such a row is refused as a
		// bad row is.
		if u := scorer.Predict(pred[start:], &dec, nil, model.ViewsOf(rec, nViews)); len(u) > 0 {
			bad := rows.Unscorable(b, u[0])
			return &bad
		}
		truth = append(truth, schemas.Labels(rec).Float64Values()...)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(truth) == 0 {
		return nil, nil, fmt.Errorf("%w: %s", errNoRows, strings.Join(inputs, " "))
	}
	return truth, pred, nil
}

// eachLabelled hands fn every batch of inputs in order, after making sure
// that all its rows decoded and are finite and labelled; the first bad row
// ends the read with an error that locates it. fn must not keep the batch's
// record. The next batch is decoded and checked while fn works on this one
// (readChecked, one batch ahead), so that a streamed training decodes while
// it computes its kernels and sums.
func eachLabelled(ctx context.Context, spec *schemas.ViewSpec, open SourceFunc, opts Options, fn func(b ingest.Batch) error) (err error) {
	src, err := open(ctx, opts.IngestOptions(true))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	ahead := make(chan checked, 1)
	go readChecked(ctx, spec, src, ahead)
	defer func() {
		// The reader must be done with the source before it is closed.
		cancel()
		for c := range ahead {
			if c.err == nil {
				c.b.Record.Release()
			}
		}
		if cerr := src.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close inputs: %w", cerr))
		}
	}()
	var done int64
	for c := range ahead {
		if c.err != nil {
			return c.err
		}
		err := fn(c.b)
		c.b.Record.Release()
		if err != nil {
			return err
		}
		done += int64(len(c.b.Rows))
		opts.Progress(done)
	}
	return nil
}

// checked is a batch whose rows all decoded and passed rows.Bad, or the
// error that ends the read.
type checked struct {
	b   ingest.Batch
	err error
}

// readChecked sends out the batches of src, checked, until the end of the
// inputs, an error (sent last) or the end of ctx, and closes out.
func readChecked(ctx context.Context, spec *schemas.ViewSpec, src ingest.Source, out chan<- checked) {
	defer close(out)
	for {
		b, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			return
		}
		if err == nil {
			if bad, _ := rows.Bad(spec, b, true); len(bad) > 0 {
				b.Record.Release()
				err = &bad[0]
			}
		}
		select {
		case out <- checked{b, err}:
		case <-ctx.Done():
			if err == nil {
				b.Record.Release()
			}
			return
		}
		if err != nil {
			return
		}
	}
}
