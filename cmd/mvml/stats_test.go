package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/internal/syncbuf"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/statsbus"
)

// merged is what the in-test merge of a stats topic found: the
// statistics, and the deltas by the refitter's verdict.
type merged struct {
	acc      *model.Accumulator
	verdicts map[statsbus.Verdict]int
}

// mergeStats reads every delta of the stats topic and merges those of
// base's lineage as the refitter does (statsbus.Stream, Ledger, the
// accumulator's codec and Merge): a repeat is dropped, an overlap
// refused.
func mergeStats(t *testing.T, c *kafkatest.Cluster, topic string, base *model.Model) merged {
	t.Helper()
	m := merged{acc: base.NewAccumulator(), verdicts: map[statsbus.Verdict]int{}}
	stream := statsbus.NewStream()
	var ledger statsbus.Ledger
	for _, msg := range c.ConsumeAll(t, topic) {
		d, _, err := stream.Add(connMessage(msg))
		if err != nil {
			t.Fatalf("stats topic offset %d: %v", msg.Offset, err)
		}
		if d == nil {
			continue
		}
		v, _ := ledger.Judge(&d.Header)
		m.verdicts[v]++
		if v != statsbus.Merge {
			continue
		}
		acc, err := d.Accumulator(base)
		if err != nil {
			t.Fatal(err)
		}
		if acc.Folds() != model.DefaultFolds {
			t.Fatalf("a delta of %d fold sums, want the default %d", acc.Folds(), model.DefaultFolds)
		}
		// As a refitter keeping one sum merges a delta of any number of
		// folds.
		if err := m.acc.Merge(acc); err != nil {
			t.Fatal(err)
		}
		ledger.Add(&d.Header)
	}
	return m
}

// statsFiles writes n CSV files of rows labelled rows each, of classSpec,
// and returns them.
func statsFiles(t *testing.T, dir string, n, rows int) []string {
	t.Helper()
	var files []string
	for k := range n {
		_, f := fixture(t, dir, fmt.Sprintf("part-%02d.csv", k), classSpec, rows, uint64(100+k), nil)
		files = append(files, f)
	}
	return files
}

// inputArgs are --input flags for files.
func inputArgs(files []string) []string {
	var args []string
	for _, f := range files {
		args = append(args, "--input", f)
	}
	return args
}

// sameFit fails the test unless got fits as want: the same lineage and
// rows, and decisions on views to 1e-8 in every metric mode (the learned
// one included: merged statistics round to one pass's, see
// model.TestMergedStatsAnyPartitionAnyOrder).
func sameFit(t *testing.T, got, want *model.Model, views []*mat.Dense) {
	t.Helper()
	if got.Lineage() != want.Lineage() || got.Meta.Rows != want.Meta.Rows {
		t.Fatalf("lineage %s, %d rows; want %s, %d rows", got.Lineage(), got.Meta.Rows, want.Lineage(), want.Meta.Rows)
	}
	var a, b mat.Dense
	got.NewScorer().Score(&a, nil, views)
	want.NewScorer().Score(&b, nil, views)
	r, c := b.Dims()
	worst := 0.0
	for i := range r {
		for j := range c {
			worst = math.Max(worst, math.Abs(a.At(i, j)-b.At(i, j))/math.Max(1, math.Abs(b.At(i, j))))
		}
	}
	if worst > 1e-8 {
		t.Errorf("decisions differ from train --like's by %g", worst)
	}
}

// `mvml stats` over 4 shards of 6 files (shard 3 told its index by
// $JOB_COMPLETION_INDEX, as a Kubernetes indexed job does), its deltas
// merged as the refitter merges them and refitted cold, equals `mvml
// train --like BASE` on all the files: decisions to 1e-8 in every mode,
// on base models of 50 landmarks per view of 3 and 2 dimensions, whose
// learned metric starts from Ã₀ ill-conditioned enough that sums merged in
// plain float64 moved them by 3e-7.
func TestStatsShardsEqualTrainLike(t *testing.T) {
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
	files := statsFiles(t, dir, 6, 50)
	spec, err := schemas.LoadViewSpec(specPath)
	if err != nil {
		t.Fatal(err)
	}
	views, _, err := pipeline.LoadLabelled(context.Background(), spec, files, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"identity", "cov", "learned"} {
		t.Run(mode, func(t *testing.T) {
			base := filepath.Join(t.TempDir(), "base.mvml")
			mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--model", base, "--landmarks", "50", "--mode", mode)
			b := loadModel(t, base)
			cluster := kafkatest.Start(t, 1, "stats")
			brokers := strings.Join(cluster.Brokers, ",")
			stats := append(inputArgs(files), "--like", base, "--brokers", brokers, "--stats-topic", "stats", "--delta-rows", "40")
			rows := 0
			for shard := range 4 {
				args := append([]string{"stats"}, stats...)
				if shard == 3 {
					t.Setenv(jobIndexEnv, "3")
					args = append(args, "--shards", "4")
				} else {
					args = append(args, "--shard", fmt.Sprintf("%d/4", shard))
				}
				out, _ := mustRun(t, args...)
				m := regexp.MustCompile(`^shard (\d)/4: (\d) files, (\d+) rows in (\d+) deltas of lineage ` + b.Lineage()).FindStringSubmatch(out)
				if m == nil || m[1] != fmt.Sprint(shard) {
					t.Fatalf("shard %d says %q", shard, out)
				}
				var n int
				fmt.Sscan(m[3], &n)
				rows += n
			}
			if rows != 300 {
				t.Errorf("the shards published %d rows, want the 300 of the files", rows)
			}
			got := mergeStats(t, cluster, "stats", b)
			if got.verdicts[statsbus.Merge] == 0 || got.verdicts[statsbus.Repeat]+got.verdicts[statsbus.Overlap] != 0 || got.acc.Rows() != 300 {
				t.Fatalf("merged %v: %v rows", got.verdicts, got.acc.Rows())
			}
			refit, err := got.acc.RefitCold(context.Background(), b.Config.Fit)
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(t.TempDir(), "like.mvml")
			mustRun(t, append(append([]string{"train"}, inputArgs(files)...), "--like", base, "--model", want)...)
			sameFit(t, refit, loadModel(t, want), views)
		})
	}
}

// A shard killed mid-pass and started again counts no row twice: the
// broker stops taking its deltas after the third, it is killed while it
// waits, and started again it publishes its six deltas, the first three
// again with the same epoch and numbers, which the merge drops as
// repeats; the statistics equal train --like's. The same files cut into
// other deltas (another --delta-rows: another epoch) are refused whole,
// their rows merged already.
func TestStatsShardRestart(t *testing.T) {
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
	files := statsFiles(t, dir, 2, 150)
	base := filepath.Join(dir, "base.mvml")
	mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--model", base, "--landmarks", "30", "--mode", "cov")
	b := loadModel(t, base)
	cluster := kafkatest.Start(t, 1, "stats")
	var produced atomic.Int64
	var healed atomic.Bool
	cluster.Drop(kmsg.Produce, func() bool { return produced.Add(1) > 3 && !healed.Load() })
	args := append(append([]string{"stats"}, inputArgs(files)...), "--like", base, "--brokers", strings.Join(cluster.Brokers, ","),
		"--stats-topic", "stats", "--delta-rows", "50")

	ctx, kill := context.WithCancel(context.Background())
	stderr := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &strings.Builder{}, stderr) }()
	deadline := time.Now().Add(60 * time.Second)
	for len(cluster.ConsumeAll(t, "stats")) < 3 || produced.Load() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the shard did not get 3 deltas through: %s", stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	kill()
	if code := <-done; code != exitError {
		t.Fatalf("the killed shard exited %d: %s", code, stderr)
	}
	if n := len(cluster.ConsumeAll(t, "stats")); n != 3 {
		t.Fatalf("%d deltas on the stats topic after the kill, want 3", n)
	}
	healed.Store(true)
	out, _ := mustRun(t, args...)
	if !strings.Contains(out, "300 rows in 6 deltas") {
		t.Errorf("the shard started again says %q", out)
	}
	got := mergeStats(t, cluster, "stats", b)
	if got.verdicts[statsbus.Merge] != 6 || got.verdicts[statsbus.Repeat] != 3 || got.acc.Rows() != 300 {
		t.Fatalf("merged %v, %v rows; want 6 merged, 3 repeats dropped, 300 rows", got.verdicts, got.acc.Rows())
	}
	refit, err := got.acc.RefitCold(context.Background(), b.Config.Fit)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "like.mvml")
	mustRun(t, append(append([]string{"train"}, inputArgs(files)...), "--like", base, "--model", want)...)
	views, _, err := pipeline.LoadLabelled(context.Background(), b.Spec, files, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameFit(t, refit, loadModel(t, want), views)

	out, _ = mustRun(t, append(args, "--delta-rows", "70")...)
	if !strings.Contains(out, "300 rows in 5 deltas") {
		t.Errorf("the pass cut otherwise says %q", out)
	}
	again := mergeStats(t, cluster, "stats", b)
	if again.verdicts[statsbus.Merge] != 6 || again.verdicts[statsbus.Overlap] != 5 || again.acc.Rows() != 300 {
		t.Errorf("after a pass cut otherwise: %v, %v rows; want its 5 deltas refused and 300 rows", again.verdicts, again.acc.Rows())
	}
}

// After `mvml stats` over 4 shards, `mvml refit --once` merges the deltas
// into the model topic's current model's lineage and publishes a model
// equal to `mvml train --like BASE` on all the files.
func TestStatsThenRefitOnce(t *testing.T) {
	if !hasCommand("refit") {
		t.Fatal("mvml has no command refit")
	}
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
	files := statsFiles(t, dir, 6, 50)
	for _, mode := range []string{"identity", "cov", "learned"} {
		t.Run(mode, func(t *testing.T) {
			cluster := kafkatest.Start(t, 1, "stats", "models")
			brokers := strings.Join(cluster.Brokers, ",")
			base := filepath.Join(t.TempDir(), "base.mvml")
			mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--model", base, "--landmarks", "50", "--mode", mode,
				"--brokers", brokers, "--model-topic", "models")
			for shard := range 4 {
				mustRun(t, append(append([]string{"stats"}, inputArgs(files)...), "--like", base, "--brokers", brokers,
					"--stats-topic", "stats", "--delta-rows", "40", "--shard", fmt.Sprintf("%d/4", shard))...)
			}
			mustRun(t, "refit", "--brokers", brokers, "--stats-topic", "stats", "--model-topic", "models", "--once", "--cold", "--http", "")
			out, _ := mustRun(t, "models", "list", "--format", "json", "--brokers", brokers, "--model-topic", "models")
			var listed struct{ Current struct{ Version string } }
			if err := json.Unmarshal([]byte(out), &listed); err != nil {
				t.Fatal(err)
			}
			refit := filepath.Join(t.TempDir(), "refit.mvml")
			mustRun(t, "models", "get", listed.Current.Version, "--output", refit, "--brokers", brokers, "--model-topic", "models")
			want := filepath.Join(t.TempDir(), "like.mvml")
			mustRun(t, append(append([]string{"train"}, inputArgs(files)...), "--like", base, "--model", want)...)
			b := loadModel(t, base)
			views, _, err := pipeline.LoadLabelled(context.Background(), b.Spec, files, pipeline.Options{})
			if err != nil {
				t.Fatal(err)
			}
			sameFit(t, loadModel(t, refit), loadModel(t, want), views)
		})
	}
}

// hasCommand reports whether mvml has the command name.
func hasCommand(name string) bool {
	for _, c := range commands() {
		if c.name == name {
			return true
		}
	}
	return false
}

// Wrong command lines of mvml stats are usage errors, and a stats topic
// that cannot take the deltas fails the job before a row is read.
func TestStatsUsage(t *testing.T) {
	dir := t.TempDir()
	specPath, data := fixture(t, dir, "data.csv", classSpec, 30, 8, nil)
	base := filepath.Join(dir, "base.mvml")
	mustRun(t, "train", "--input", data, "--views", specPath, "--model", base, "--landmarks", "10")
	cluster := kafkatest.Start(t, 2, "two")
	brokers := strings.Join(cluster.Brokers, ",")
	ok := []string{"stats", "--input", data, "--like", base, "--brokers", brokers, "--stats-topic", "stats"}
	for _, tc := range []struct {
		name string
		args []string
		env  string
		code int
		want string
	}{
		{"no base", []string{"stats", "--input", data, "--brokers", brokers, "--stats-topic", "s"}, "", exitUsage, "--like is required"},
		{"no brokers", []string{"stats", "--input", data, "--like", base, "--stats-topic", "s"}, "", exitUsage, "--brokers is required"},
		{"shard out of range", append(ok, "--shard", "4/4"), "", exitUsage, `--shard "4/4": want I/N with 0 ≤ I < N`},
		{"shard without count", append(ok, "--shard", "1"), "", exitUsage, `--shard "1": want I/N`},
		{"shard and shards", append(ok, "--shard", "0/2", "--shards", "2"), "", exitUsage, "give --shard I/N or --shards N, not both"},
		{"shards outside a job", append(ok, "--shards", "2"), "", exitUsage, "$JOB_COMPLETION_INDEX, which is not set"},
		{"job index out of range", append(ok, "--shards", "2"), "2", exitUsage, `$JOB_COMPLETION_INDEX "2" with --shards 2: want an index from 0 to 1`},
		{"no rows per delta", append(ok, "--delta-rows", "0"), "", exitUsage, "--delta-rows 0 must be positive"},
		{"missing topic", ok, "", exitError, "mvml stats: stats topic stats does not exist: create it with one partition"},
		{"two partitions", []string{"stats", "--input", data, "--like", base, "--brokers", brokers, "--stats-topic", "two"}, "", exitError, "stats topic two has 2 partitions, want 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(jobIndexEnv, tc.env)
			}
			code, stdout, stderr := mvml(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and %q", code, stdout, stderr, tc.code, tc.want)
			}
		})
	}
}
