package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mvml/mvml/pipeline"
)

// A training whose estimated need exceeds --memory-limit is refused before
// it writes anything, with the figure and the flag that would fit; that
// flag then fits.
func TestTrainMemoryLimitRefuses(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 300, 5, nil)
	model := filepath.Join(dir, "m.mvml")
	for _, stream := range []string{"--stream=false", "--stream"} {
		code, _, stderr := mvml(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "40", stream, "--memory-limit", "20MB")
		if code != exitError || !strings.Contains(stderr, "needs about") ||
			!strings.Contains(stderr, "more than the memory limit of 20 MB (--memory-limit)") {
			t.Fatalf("%s under --memory-limit 20MB: exit %d, stderr %q; want a refusal with the need and the limit", stream, code, stderr)
		}
		if _, err := os.Stat(model); !os.IsNotExist(err) {
			t.Fatalf("%s: a refused training wrote its model: %v", stream, err)
		}
		m := regexp.MustCompile(`--memory-limit (\S+)`).FindStringSubmatch(stderr)
		if m == nil {
			t.Fatalf("%s: no --memory-limit that would fit in %q", stream, stderr)
		}
		mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "40", stream, "--memory-limit", m[1])
		if err := os.Remove(model); err != nil {
			t.Fatal(err)
		}
	}
	// Too many landmarks for the limit: the count that fits is named.
	limit := fmt.Sprint((pipeline.EstimateTrain(300, 2, 5, 300, 1, pipeline.DefaultSampleRows).Streamed +
		pipeline.EstimateTrain(300, 2, 5, 100, 1, pipeline.DefaultSampleRows).Streamed) / 2)
	code, _, stderr := mvml(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", "300", "--stream", "--memory-limit", limit)
	m := regexp.MustCompile(`--landmarks (\d+)`).FindStringSubmatch(stderr)
	if code != exitError || m == nil {
		t.Fatalf("300 landmarks under %s bytes: exit %d, stderr %q; want a refusal naming the landmarks that fit", limit, code, stderr)
	}
	mustRun(t, "train", "--input", data, "--views", spec, "--model", model, "--landmarks", m[1], "--stream", "--memory-limit", limit, "--mode", "identity")

	for _, bad := range []string{"0", "-1GB", "2XB", "lots"} {
		if code, _, stderr := mvml(t, "train", "--input", data, "--views", spec, "--model", model, "--memory-limit", bad); code != exitUsage {
			t.Errorf("--memory-limit %q: exit %d, stderr %q; want a usage error", bad, code, stderr)
		}
	}
}

// Holding the rows above the memory allowed, a training streams them
// instead and says so; asked to hold them (--stream=false), it refuses and
// names --stream.
func TestTrainStreamsAboveMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	const rows, sample, landmarks = 20000, 500, 30
	spec, data := fixture(t, dir, "data.csv", classSpec, rows, 6, nil)
	est := pipeline.EstimateTrain(rows, 2, 5, landmarks, 1, sample)
	if est.Held-est.Streamed < 2<<20 {
		t.Fatalf("estimates %+v: holding the rows should need 2 MB more than streaming them", est)
	}
	limit := fmt.Sprint((est.Held + est.Streamed) / 2)
	model := filepath.Join(dir, "m.mvml")
	args := []string{"train", "--input", data, "--views", spec, "--model", model, "--landmarks", fmt.Sprint(landmarks),
		"--sample-rows", fmt.Sprint(sample), "--mode", "identity", "--memory-limit", limit}
	_, stderr := mustRun(t, args...)
	if !strings.Contains(stderr, "streaming the rows") || !strings.Contains(stderr, "streamed labelled rows") {
		t.Errorf("under --memory-limit %s: want the rows streamed, and said so; stderr %q", limit, stderr)
	}
	if err := os.Remove(model); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := mvml(t, append(args, "--stream=false")...)
	if code != exitError || !strings.Contains(stderr, "holding 20000 rows in memory needs about") || !strings.Contains(stderr, "give --stream (about") {
		t.Errorf("--stream=false under --memory-limit %s: exit %d, stderr %q; want a refusal naming --stream", limit, code, stderr)
	}
	if _, err := os.Stat(model); !os.IsNotExist(err) {
		t.Fatalf("a refused training wrote its model: %v", err)
	}
}

// The default landmark count is 12% of the rows, at most
// pipeline.DefaultMaxLandmarks per view, said in the log when it bounds;
// a --landmarks given is used exactly, in memory and streamed.
func TestTrainDefaultLandmarksBounded(t *testing.T) {
	dir := t.TempDir()
	const rows = 2200 // 12% is 264
	spec, data := fixture(t, dir, "data.csv", classSpec, rows, 7, nil)
	model := filepath.Join(dir, "m.mvml")
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, pipeline.DefaultMaxLandmarks},
		{[]string{"--stream"}, pipeline.DefaultMaxLandmarks},
		{[]string{"--landmarks", "0.12"}, 264},
		{[]string{"--landmarks", "0.05"}, 110},
		{[]string{"--landmarks", "300"}, 300},
	} {
		args := append([]string{"train", "--input", data, "--views", spec, "--model", model, "--mode", "identity"}, tc.args...)
		stdout, stderr := mustRun(t, args...)
		if !strings.Contains(stdout, fmt.Sprintf(" %d landmarks per view", tc.want)) {
			t.Errorf("%v: %q, want %d landmarks per view", tc.args, stdout, tc.want)
		}
		if bounded := strings.Contains(stderr, "landmarks bounded"); bounded != (tc.want == pipeline.DefaultMaxLandmarks) {
			t.Errorf("%v: the log says the bound %v times, want %v: %q", tc.args, bounded, !bounded, stderr)
		}
	}
}

// A landmark count above the training rows is refused, not quietly
// lowered to the rows, whether they are held or streamed, and whether
// their count is known before they are read (Parquet) or not (gzip CSV).
func TestTrainLandmarksAboveRows(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 100, 8, nil)
	pq := filepath.Join(dir, "data.parquet")
	toParquet(t, spec, data, pq)
	model := filepath.Join(dir, "m.mvml")
	for _, in := range []string{data, pq} {
		for _, stream := range []string{"--stream=false", "--stream"} {
			code, _, stderr := mvml(t, "train", "--input", in, "--views", spec, "--model", model, "--landmarks", "150", stream, "--sample-rows", "200")
			if code != exitError || !strings.Contains(stderr, "landmarks 150: more than the 100 training rows; give at most 100") {
				t.Errorf("%s %s, 150 landmarks on 100 rows: exit %d, stderr %q; want a refusal", filepath.Base(in), stream, code, stderr)
			}
			if _, err := os.Stat(model); !os.IsNotExist(err) {
				t.Fatalf("a refused training wrote its model: %v", err)
			}
		}
	}
	mustRun(t, "train", "--input", pq, "--views", spec, "--model", model, "--landmarks", "100", "--mode", "identity")
}

// Rows that cannot be counted before they are read (gzip CSV) are checked
// as they come: past what the training may hold, it streams them, or,
// asked to hold them, refuses.
func TestTrainUncountedRowsStream(t *testing.T) {
	dir := t.TempDir()
	const rows, sample, landmarks = 20000, 500, 30
	spec, data := fixture(t, dir, "data.csv", classSpec, rows, 9, nil)
	plain, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	gz := filepath.Join(dir, "data.csv.gz")
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(plain); err != nil || zw.Close() != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gz, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// Room for the streamed training and 1 MB, less than the 2.4 MB the
	// rows take held.
	limit := fmt.Sprint(pipeline.EstimateTrain(rows, 2, 5, landmarks, 1, sample).Streamed + 1<<20)
	model := filepath.Join(dir, "m.mvml")
	args := []string{"train", "--input", gz, "--views", spec, "--model", model, "--landmarks", fmt.Sprint(landmarks),
		"--sample-rows", fmt.Sprint(sample), "--mode", "identity", "--memory-limit", limit}
	stdout, stderr := mustRun(t, args...)
	if !strings.Contains(stderr, "streaming the rows") || !strings.Contains(stdout, "20000 rows") {
		t.Errorf("uncounted rows under --memory-limit %s: want them streamed, all of them, and said so; stdout %q, stderr %q", limit, stdout, stderr)
	}
	if err := os.Remove(model); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := mvml(t, append(args, "--stream=false")...)
	if code != exitError || !regexp.MustCompile(`holding more than \d+ rows in memory needs more than`).MatchString(stderr) || !strings.Contains(stderr, "give --stream") {
		t.Errorf("--stream=false: exit %d, stderr %q; want a refusal naming --stream", code, stderr)
	}
	if _, err := os.Stat(model); !os.IsNotExist(err) {
		t.Fatalf("a refused training wrote its model: %v", err)
	}
}

// cv bounds the default share of a fold's training rows as train does,
// and uses a --landmarks given exactly.
func TestCVDefaultLandmarksBounded(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 3000, 10, nil) // 2,250 rows a fold: 12% is 270
	for _, tc := range []struct {
		args    []string
		bounded bool
	}{
		{nil, true},
		{[]string{"--landmarks", "0.12"}, false},
	} {
		args := append([]string{"cv", "--input", data, "--views", spec, "--folds", "4", "--mode", "identity", "--max-iter", "0"}, tc.args...)
		_, stderr := mustRun(t, args...)
		if got := strings.Contains(stderr, `landmarks bounded`) && strings.Contains(stderr, fmt.Sprintf("landmarks=%d", pipeline.DefaultMaxLandmarks)); got != tc.bounded {
			t.Errorf("cv %v: bounded %v, want %v; stderr %q", tc.args, got, tc.bounded, stderr)
		}
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"2GB", 2e9}, {"2 GB", 2e9}, {"1.5GiB", 3 << 29}, {"512MiB", 512 << 20}, {"800M", 800e6},
		{"100", 100}, {"64kB", 64e3}, {"1TiB", 1 << 40}, {"0", -1}, {"-1GB", -1}, {"2XB", -1}, {"GB", -1}, {"", -1},
	}
	for _, tc := range tests {
		got, err := parseBytes(tc.in)
		if tc.want < 0 {
			if err == nil {
				t.Errorf("parseBytes(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	// The sizes messages propose read back as at least the need.
	for _, n := range []int64{1, 999, 123_456_789, 2_147_483_648} {
		s := strings.ReplaceAll(pipeline.Bytes(n), " ", "")
		if _, err := parseBytes(s); err != nil {
			t.Errorf("pipeline.Bytes(%d) = %q does not parse: %v", n, s, err)
		}
	}
}
