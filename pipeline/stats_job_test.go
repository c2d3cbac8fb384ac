package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/statsbus"
)

// deltaOutline is what names a delta and what it holds, without the
// statistics.
type deltaOutline struct {
	id     statsbus.ID
	rows   int64
	ranges string
}

// runStatsShard runs job and returns the outlines of its deltas.
func runStatsShard(t *testing.T, job StatsJob) ([]deltaOutline, StatsResult) {
	t.Helper()
	var got []deltaOutline
	job.Publish = func(_ context.Context, d *statsbus.Delta) error {
		got = append(got, deltaOutline{d.ID(), d.Rows, fmt.Sprint(d.Ranges)})
		return nil
	}
	res, err := RunStats(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	return got, res
}

// A shard's deltas are cut every DeltaRows rows of its files whatever the
// batch size, across the end of a file, and named by an epoch that the
// shard's files and cuts make: the same files give the same deltas, and
// a file changed, another cut or another shard gives another epoch. The
// rows are named by file (FileRangeTopic) and row.
func TestStatsDeltasRepeatExactly(t *testing.T) {
	spec := testSpec(t)
	dir := t.TempDir()
	var files []string
	for k := range 5 {
		f := filepath.Join(dir, fmt.Sprintf("part-%d.csv", k))
		pipelinetest.WriteCSV(t, f, spec, makeData(spec, 30+k, uint64(k)), nil)
		files = append(files, f)
	}
	base := trainTestModel(t, spec, makeData(spec, 120, 9))
	job := StatsJob{Base: base, Inputs: []string{filepath.Join(dir, "part-*.csv")}, Shard: 1, Shards: 2, DeltaRows: 25}

	first, res := runStatsShard(t, job)
	// Shard 1 of 2 reads files 1 and 3: 31 + 33 rows in deltas of 25.
	if !slices.Equal(res.Files, []string{files[1], files[3]}) || res.Rows != 64 || res.Deltas != 3 {
		t.Fatalf("shard read %v: %d rows in %d deltas", res.Files, res.Rows, res.Deltas)
	}
	wantRanges := []string{
		fmt.Sprintf("[{file:%s 1 [[0,25)]}]", files[1]),
		fmt.Sprintf("[{file:%s 1 [[25,31)]} {file:%s 3 [[0,19)]}]", files[1], files[3]),
		fmt.Sprintf("[{file:%s 3 [[19,33)]}]", files[3]),
	}
	for i, d := range first {
		if d.ranges != wantRanges[i] || d.id.Seq != uint64(i+1) || d.id.Replica != "mvml-stats-1-of-2" || d.id.Epoch != res.Epoch {
			t.Errorf("delta %d: %+v, want ranges %s", i, d, wantRanges[i])
		}
	}
	for _, batch := range []int{1, 7, 4096} {
		job := job
		job.BatchSize = batch
		if again, _ := runStatsShard(t, job); !slices.Equal(again, first) {
			t.Errorf("batches of %d rows: deltas %v, want %v", batch, again, first)
		}
	}
	for _, tc := range []struct {
		name string
		edit func(job *StatsJob)
	}{
		{"another cut", func(job *StatsJob) { job.DeltaRows = 26 }},
		{"another shard", func(job *StatsJob) { job.Shard = 0 }},
		{"a file rewritten", func(*StatsJob) {
			pipelinetest.WriteCSV(t, files[3], spec, makeData(spec, 33, 77), nil)
			later := time.Now().Add(time.Minute)
			if err := os.Chtimes(files[3], later, later); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		job := job
		tc.edit(&job)
		if _, other := runStatsShard(t, job); other.Epoch == res.Epoch {
			t.Errorf("%s: the same epoch %s", tc.name, other.Epoch)
		}
	}
}

// The number of folds is part of a shard's epoch: deltas of K fold sums
// and deltas of one over the same files and cuts are other deltas, so
// that a job run again with another --folds is not taken for a repeat of
// the first (nor merged as one epoch with it). One fold, the default,
// keeps its epoch.
func TestStatsEpochCountsFolds(t *testing.T) {
	spec := testSpec(t)
	dir := t.TempDir()
	pipelinetest.WriteCSV(t, filepath.Join(dir, "part-0.csv"), spec, makeData(spec, 40, 3), nil)
	base := trainTestModel(t, spec, makeData(spec, 120, 9))
	epochs := map[int]string{}
	for _, folds := range []int{0, 1, 3, 5} {
		job := StatsJob{Base: base, Inputs: []string{filepath.Join(dir, "part-*.csv")}, DeltaRows: 25, Folds: folds}
		deltas, res := runStatsShard(t, job)
		if len(deltas) != 2 || deltas[0].id.Epoch != res.Epoch {
			t.Fatalf("%d folds: deltas %+v, epoch %s", folds, deltas, res.Epoch)
		}
		epochs[folds] = res.Epoch
	}
	if epochs[0] != epochs[1] {
		t.Errorf("the default and one fold: epochs %s and %s", epochs[0], epochs[1])
	}
	for _, pair := range [][2]int{{1, 5}, {1, 3}, {3, 5}} {
		if a, b := epochs[pair[0]], epochs[pair[1]]; a == b {
			t.Errorf("%d and %d folds: the same epoch %s", pair[0], pair[1], a)
		}
	}
}

// A bad row fails the shard naming its file, row and column, as training
// does; a shard without files publishes nothing; the shard and its
// publisher are checked.
func TestStatsJobErrors(t *testing.T) {
	spec := testSpec(t)
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.csv"), filepath.Join(dir, "bad.csv")
	pipelinetest.WriteCSV(t, good, spec, makeData(spec, 20, 1), nil)
	pipelinetest.WriteCSV(t, bad, spec, makeData(spec, 20, 2), map[int]map[string]string{7: {spec.Label: "9"}})
	base := trainTestModel(t, spec, makeData(spec, 120, 9))
	publish := func(context.Context, *statsbus.Delta) error { return nil }

	_, err := RunStats(context.Background(), StatsJob{Base: base, Inputs: []string{good, bad}, Publish: publish})
	var re *schemas.RowError
	if !errors.As(err, &re) || re.Source != bad || re.Row != 7 || re.Column != spec.Label {
		t.Errorf("a label the base cannot learn: %v", err)
	}
	if got, res := runStatsShard(t, StatsJob{Base: base, Inputs: []string{good}, Shard: 1, Shards: 2}); len(got) != 0 || len(res.Files) != 0 {
		t.Errorf("a shard without files published %v", got)
	}
	for _, tc := range []struct {
		job  StatsJob
		want string
	}{
		{StatsJob{Inputs: []string{good}, Publish: publish}, "no base model"},
		{StatsJob{Base: base, Inputs: []string{good}}, "nowhere to publish"},
		{StatsJob{Base: base, Inputs: []string{good}, Publish: publish, Shard: 2, Shards: 2}, "shard 2 of 2"},
	} {
		if _, err := RunStats(context.Background(), tc.job); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.job, err, tc.want)
		}
	}
}
