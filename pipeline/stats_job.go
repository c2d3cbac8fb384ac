package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"os"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/statsbus"
)

// DefaultDeltaRows is StatsJob.DeltaRows's default: a delta of D features
// holds about 16·D²/2 bytes whatever its rows (4.7 MB at D = 768), and a
// restarted shard reads its files again from the start anyway.
const DefaultDeltaRows = 100_000

// FileRangeTopic is the "topic" of a delta's ranges that names the rows
// of an input file: "file:" and the file's name as the job was given it
// (globs expanded). The range's partition is the file's index among all
// the job's files, its runs the rows' indexes in the file (from 0, data
// rows only), so that the refitter refuses a delta whose rows it merged
// before (statsbus.Ledger), as it does a label's offset.
func FileRangeTopic(path string) string { return "file:" + path }

// StatsJob is one shard of a pass over labelled files that publishes the
// statistics of their rows on a model's features as deltas (`mvml
// stats`), which the refitter merges and refits (`mvml refit --once`),
// as `mvml train --like` would fit on all the files. Shards are the pods
// of an indexed job, each on its share of the files.
//
// A shard killed mid-pass and started again counts no row twice: its
// deltas are numbered within an epoch that is not random but derived from
// what the shard reads (the base model's lineage, the shard, DeltaRows,
// Folds, and its files' names, sizes and modification times), and their
// boundaries fall every DeltaRows rows of the shard's files, whatever the
// batch size; so the shard started again publishes the deltas it
// published before with the same epoch, sequence numbers and rows, which
// the refitter drops as repeats, and then the ones it had not. A delta
// that is not such a repeat but holds rows merged before (the files or
// DeltaRows changed in between) is refused whole by the refitter, its
// rows named by FileRangeTopic ranges. Running the job again on the same
// files adds nothing for the same reason: its rows are in the statistics
// already.
type StatsJob struct {
	// Base is the model whose lineage the statistics are gathered on: its
	// spec reads the files, and its features and target encoding make the
	// rows' statistics. Required.
	Base *model.Model
	// Inputs are files or glob patterns, the same for every shard: file k
	// (in the order Inputs list them, globs expanded) belongs to shard
	// k mod Shards. Required.
	Inputs []string
	// Shard (from 0) of Shards (default 1) is this job's share.
	Shard, Shards int
	// DeltaRows is the most rows of a delta; the shard's last has fewer.
	// Default (0) DefaultDeltaRows.
	DeltaRows int64
	// Folds, when more than 1, keeps the statistics of every delta as
	// that many fold sums, each row's fold chosen by its record id
	// (model.FoldOf), for a refitter that tunes (refit.Config.Tune):
	// Folds times the size of a delta. Default (0) one, today's deltas.
	// A refitter of several folds refuses deltas of another number; one
	// keeping one sum adds their folds up.
	Folds int
	// Publish publishes a delta and returns once the brokers
	// acknowledged it whole (StatsTopic.Publish). Required.
	Publish func(ctx context.Context, d *statsbus.Delta) error
	Options
}

// StatsResult is what a shard published.
type StatsResult struct {
	// Files are the shard's files.
	Files []string
	// Rows and Deltas count what was published.
	Rows   int64
	Deltas int
	// Replica and Epoch name the shard's deltas (statsbus.Header).
	Replica, Epoch string
}

// RunStats reads the shard's files, refusing a bad row (as training
// does: a row that does not decode, a feature that is not finite, a label
// Base cannot learn from, each named by file, row and column), and
// publishes the statistics of their rows every DeltaRows rows and at the
// end. A shard without files publishes nothing.
func RunStats(ctx context.Context, job StatsJob) (StatsResult, error) {
	job.Options = job.Options.WithDefaults()
	if job.Shards == 0 {
		job.Shards = 1
	}
	if job.DeltaRows == 0 {
		job.DeltaRows = DefaultDeltaRows
	}
	switch {
	case job.Base == nil:
		return StatsResult{}, errors.New("statistics pass: no base model")
	case job.Publish == nil:
		return StatsResult{}, errors.New("statistics pass: nowhere to publish")
	case job.DeltaRows < 0:
		return StatsResult{}, fmt.Errorf("statistics pass: %d rows per delta", job.DeltaRows)
	case job.Folds < 0 || job.Folds > model.MaxFolds:
		return StatsResult{}, fmt.Errorf("statistics pass: %d folds: want 1 to %d", job.Folds, model.MaxFolds)
	}
	mine, all, err := shardFiles(job.Inputs, job.Shard, job.Shards)
	if err != nil {
		return StatsResult{}, err
	}
	g := &gatherer{job: job, nViews: len(job.Base.Spec.Views), acc: job.newAccumulator(), res: StatsResult{
		Replica: fmt.Sprintf("mvml-stats-%d-of-%d", job.Shard, job.Shards),
		Epoch:   statsEpoch(job.Base.Lineage(), job.Shard, job.Shards, job.DeltaRows, job.Folds, mine),
	}}
	job.Logger.Info("statistics pass", "shard", job.Shard, "shards", job.Shards, "files", len(mine), "of", all,
		"replica", g.res.Replica, "epoch", g.res.Epoch)
	var done int64 // rows of the files before the one read
	for _, f := range mine {
		g.res.Files = append(g.res.Files, f.path)
		opts := job.Options
		opts.Progress = func(rows int64) { job.Progress(done + rows) }
		before := g.res.Rows + g.rows
		err := eachLabelled(ctx, job.Base.Spec, FileSource(job.Base.Spec, []string{f.path}), opts, func(b ingest.Batch) error {
			return g.add(ctx, f, b)
		})
		if err != nil {
			return g.res, err
		}
		done += g.res.Rows + g.rows - before
	}
	if err := g.flush(ctx); err != nil {
		return g.res, err
	}
	return g.res, nil
}

// ShardFiles are the files of inputs (files or globs) that shard of shards
// reads: file k, in the order inputs list them, belongs to shard k mod
// shards.
func ShardFiles(inputs []string, shard, shards int) ([]string, error) {
	mine, _, err := shardFiles(inputs, shard, shards)
	paths := make([]string, len(mine))
	for i, f := range mine {
		paths[i] = f.path
	}
	return paths, err
}

// shardFiles returns the files of shard, and the number of files of all
// shards.
func shardFiles(inputs []string, shard, shards int) ([]shardFile, int, error) {
	if shards < 1 || shard < 0 || shard >= shards {
		return nil, 0, fmt.Errorf("statistics pass: shard %d of %d: want 0 ≤ shard < shards", shard, shards)
	}
	all, err := ingest.Files(inputs)
	if err != nil {
		return nil, 0, err
	}
	var mine []shardFile
	for k, path := range all {
		if k%shards != shard {
			continue
		}
		info, err := os.Stat(path)
		if err != nil {
			return nil, 0, fmt.Errorf("statistics pass: %w", err)
		}
		mine = append(mine, shardFile{index: k, path: path, size: info.Size(), modified: info.ModTime()})
	}
	return mine, len(all), nil
}

// shardFile is a file of a shard: its index among all the job's files,
// and what says that it is the same file when the shard starts again.
type shardFile struct {
	index    int
	path     string
	size     int64
	modified time.Time
}

// statsEpoch is the epoch of a shard's deltas: a hash of what the shard
// reads and how it cuts its deltas, fold sums included, so that the
// shard started again names its deltas as before (the refitter drops them
// as repeats), and a shard of other files, cuts or number of folds does
// not: deltas of K fold sums are other deltas than those of one. One fold
// (folds ≤ 1) hashes as before folds existed, so that such a shard's
// deltas keep their names.
func statsEpoch(lineage string, shard, shards int, deltaRows int64, folds int, files []shardFile) string {
	h := sha256.New()
	fmt.Fprintf(h, "mvml stats\x00%s\x00%d/%d\x00%d", lineage, shard, shards, deltaRows)
	if folds > 1 {
		fmt.Fprintf(h, "\x00folds %d", folds)
	}
	h.Write([]byte{'\n'})
	for _, f := range files {
		fmt.Fprintf(h, "%d\x00%s\x00%d\x00%d\n", f.index, f.path, f.size, f.modified.UnixNano())
	}
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h.Sum(nil)[:16])
}

// gatherer accumulates the rows of a shard into deltas of job.DeltaRows
// rows.
type gatherer struct {
	job    StatsJob
	nViews int
	acc    *model.Accumulator
	// rows and ranges are those of acc, the delta being gathered.
	rows   int64
	ranges statsbus.Ranges
	seq    uint64
	res    StatsResult
}

// add takes the rows of b, a batch of file f, cutting a delta whenever it
// has job.DeltaRows rows.
func (g *gatherer) add(ctx context.Context, f shardFile, b ingest.Batch) error {
	n := int(b.Record.NumRows())
	labels := schemas.Labels(b.Record).Float64Values()
	for i, y := range labels {
		if err := g.job.Base.CheckLabel(y); err != nil {
			return &schemas.RowError{Source: b.Source, Row: b.Rows[i], Column: g.job.Base.Spec.Label, Reason: err.Error()}
		}
	}
	views := model.ViewsOf(b.Record, g.nViews)
	ids := schemas.IDs(b.Record).Int64Values()
	part := make([]*mat.Dense, g.nViews)
	for lo := 0; lo < n; {
		hi := min(n, lo+int(g.job.DeltaRows-g.rows))
		for l, v := range views {
			_, d := v.Dims()
			part[l] = v.Slice(lo, hi, 0, d).(*mat.Dense)
		}
		if err := addRows(g.acc, ids[lo:hi], part, labels[lo:hi]); err != nil {
			return locateRow(err, batchOrigins(b)[lo:hi])
		}
		// eachLabelled refuses a batch with a bad row: the batch's rows
		// are consecutive rows of the file.
		g.ranges.AddAll(statsbus.Ranges{{Topic: FileRangeTopic(f.path), Partition: f.index,
			Runs: statsbus.Runs{{From: b.Rows[lo], To: b.Rows[hi-1] + 1}}}})
		g.rows += int64(hi - lo)
		if g.rows == g.job.DeltaRows {
			if err := g.flush(ctx); err != nil {
				return err
			}
		}
		lo = hi
	}
	return nil
}

// flush publishes the delta gathered, if it holds a row, and starts the
// next.
func (g *gatherer) flush(ctx context.Context) error {
	if g.rows == 0 {
		return nil
	}
	g.seq++
	d, err := statsbus.New(g.acc, statsbus.Header{BaseVersion: g.job.Base.Version, Replica: g.res.Replica, Epoch: g.res.Epoch,
		Seq: g.seq, Created: time.Now().UTC(), Ranges: g.ranges})
	if err == nil {
		err = g.job.Publish(ctx, d)
	}
	if err != nil {
		return fmt.Errorf("statistics delta %d of shard %d/%d: %w", g.seq, g.job.Shard, g.job.Shards, err)
	}
	g.job.Logger.Info("statistics delta published", "seq", g.seq, "rows", g.rows, "ranges", len(g.ranges))
	g.res.Rows += g.rows
	g.res.Deltas++
	g.acc, g.rows, g.ranges = g.job.newAccumulator(), 0, nil
	return nil
}

// newAccumulator is an empty accumulator of the job's folds on Base.
func (job StatsJob) newAccumulator() *model.Accumulator {
	if job.Folds <= 1 {
		return job.Base.NewAccumulator()
	}
	acc, err := job.Base.NewFoldAccumulator(job.Folds)
	if err != nil {
		panic(err) // RunStats checked Folds
	}
	return acc
}
