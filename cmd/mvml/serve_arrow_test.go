package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/internal/kafkatest"
)

// writeArrowRecords writes the rows of a fixture CSV (classSpec's views a
// and b) as one Arrow IPC stream of one record batch to path, the way a
// producer outside mvml would: arrow's builders and IPC writer, views as
// fixed-size lists of doubles, no label. nan puts a NaN in view b of that
// row. It returns the ids written.
func writeArrowRecords(t *testing.T, csvPath, path string, nan int) []int64 {
	t.Helper()
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "a", Type: arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float64)},
		{Name: "b", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float64)},
	}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	var ids []int64
	for r, row := range rows[1:] {
		for j, name := range rows[0] {
			v, err := strconv.ParseFloat(row[j], 64)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case name == "id":
				b.Field(0).(*array.Int64Builder).Append(int64(v))
				ids = append(ids, int64(v))
			case strings.HasPrefix(name, "a_") || strings.HasPrefix(name, "b_"):
				l := 1
				if name[0] == 'b' {
					l = 2
					if r == nan && name == "b_1" {
						v = math.NaN()
					}
				}
				list := b.Field(l).(*array.FixedSizeListBuilder)
				if strings.HasSuffix(name, "_0") {
					list.Append(true)
				}
				list.ValueBuilder().(*array.Float64Builder).Append(v)
			}
		}
	}
	rec := b.NewRecord()
	defer rec.Release()
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := ipc.NewWriter(out, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// kcatMessage is a message as kcat -C prints it with kcatFormat.
type kcatMessage struct {
	headers string
	value   []byte
}

// kcatFormat prints the headers and the value's size on a line, then the
// value, so that binary values can be told apart.
const kcatFormat = "%h %S\n%s"

// kcatConsume reads every message of topic with kcat.
func kcatConsume(t *testing.T, kcat, brokers, topic string) []kcatMessage {
	t.Helper()
	out, err := exec.Command(kcat, "-C", "-b", brokers, "-t", topic, "-e", "-q", "-f", kcatFormat).Output()
	if err != nil {
		t.Fatalf("kcat -C %s: %v", topic, err)
	}
	var msgs []kcatMessage
	r := bufio.NewReader(bytes.NewReader(out))
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF && line == "" {
			return msgs
		}
		cut := strings.LastIndexByte(line, ' ')
		size, perr := strconv.Atoi(strings.TrimSpace(line[cut+1:]))
		if err != nil || perr != nil {
			t.Fatalf("kcat -C %s: %q: %v %v", topic, line, err, perr)
		}
		value := make([]byte, size)
		if _, err := io.ReadFull(r, value); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kcatMessage{headers: line[:cut], value: value})
	}
}

// ipcIDs reads the ids of the rows of an Arrow IPC stream.
func ipcIDs(t *testing.T, value []byte) []int64 {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(value))
	if err != nil {
		t.Fatalf("not an Arrow IPC stream: %v", err)
	}
	defer r.Release()
	var ids []int64
	for r.Next() {
		ids = append(ids, r.Record().Column(0).(*array.Int64).Int64Values()...)
	}
	return ids
}

// `mvml serve` on Arrow IPC with an independent producer and consumer:
// record batches written by arrow's IPC writer to files, sent by kcat
// (librdkafka) one file a message, with the content-type header or, with
// --format arrow, without; scores read back by kcat as IPC streams
// (--output-format arrow). A row with a NaN is dead-lettered alone as a
// one-row IPC stream, a file that is no IPC stream whole; a JSON record
// sent beside them is scored too when the format goes by the header.
func TestServeArrowWithKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (Debian package kcat; .ci/run installs it)")
	}
	dir := t.TempDir()
	streamCSV, modelPath := trainedForServe(t, dir, 40)
	for _, tt := range []struct {
		name   string
		header bool
		format []string
	}{
		{"by header", true, nil},
		{"--format arrow", false, []string{"--format", "arrow"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cluster := kafkatest.Start(t, 1, "records", "scores", "dead")
			brokers := strings.Join(cluster.Brokers, ",")
			records := filepath.Join(t.TempDir(), "records.arrow")
			ids := writeArrowRecords(t, streamCSV, records, 17)
			junk := filepath.Join(t.TempDir(), "junk.arrow")
			if err := os.WriteFile(junk, []byte("not an IPC stream"), 0o644); err != nil {
				t.Fatal(err)
			}
			produce := []string{"-P", "-b", brokers, "-t", "records"}
			if tt.header {
				produce = append(produce, "-H", "content-type=application/vnd.apache.arrow.stream")
			}
			if out, err := exec.Command(kcat, append(produce, records, junk)...).CombinedOutput(); err != nil {
				t.Fatalf("kcat -P: %v\n%s", err, out)
			}
			wantScored := slices.Delete(slices.Clone(ids), 17, 18)
			if tt.header {
				json := exec.Command(kcat, "-P", "-b", brokers, "-t", "records")
				json.Stdin = strings.NewReader(`{"id": 900, "a": [0.1, 0.2, 0.3], "b": [0.4, 0.5]}` + "\n")
				if out, err := json.CombinedOutput(); err != nil {
					t.Fatalf("kcat -P: %v\n%s", err, out)
				}
				wantScored = append(wantScored, 900)
			}
			srv := startServe(append([]string{"--brokers", brokers, "--topic", "records", "--output-topic", "scores", "--output-format", "arrow",
				"--dead-letter-topic", "dead", "--model", modelPath, "--max-wait", "50ms", "--http", ""}, tt.format...)...)
			messages := int64(2)
			if tt.header {
				messages++
			}
			srv.waitFor(t, "every message committed", func() bool {
				// The group exists once a message went through.
				return len(cluster.ConsumeAll(t, "dead")) == 2 && cluster.CommittedOffsets(t, "mvml", "records")[0] >= messages
			})
			if code := srv.stop(t); code != exitOK {
				t.Fatalf("exit %d: %s", code, srv.stderr)
			}
			want := "in " + strconv.Itoa(len(wantScored)+2) + " = scored " + strconv.Itoa(len(wantScored)) + " + dead-lettered 2 + not committed 0;"
			if !strings.Contains(srv.stderr.String(), want) {
				t.Errorf("stderr lacks %q:\n%s", want, srv.stderr)
			}
			var scored []int64
			for _, m := range kcatConsume(t, kcat, brokers, "scores") {
				if !strings.Contains(m.headers, "content-type=application/vnd.apache.arrow.stream") {
					t.Errorf("scores with headers %q", m.headers)
				}
				scored = append(scored, ipcIDs(t, m.value)...)
			}
			slices.Sort(scored)
			slices.Sort(wantScored)
			if !slices.Equal(scored, wantScored) {
				t.Errorf("kcat read scores of ids %v, want %v", scored, wantScored)
			}
			dead := kcatConsume(t, kcat, brokers, "dead")
			if len(dead) != 2 {
				t.Fatalf("kcat read %d dead letters, want 2", len(dead))
			}
			if got := ipcIDs(t, dead[0].value); !slices.Equal(got, ids[17:18]) ||
				!strings.Contains(dead[0].headers, `mvml-reason=message row 17: view "b" item 1 is NaN`) ||
				!strings.Contains(dead[0].headers, "content-type=application/vnd.apache.arrow.stream") {
				t.Errorf("dead letter %q of ids %v, want the row of id %d alone with its reason", dead[0].headers, got, ids[17])
			}
			if string(dead[1].value) != "not an IPC stream" || !strings.Contains(dead[1].headers, "mvml-reason=not an Arrow IPC stream") {
				t.Errorf("dead letter %q %q, want the junk message whole with its reason", dead[1].headers, dead[1].value)
			}
		})
	}
}

// The format flags are used exactly or refused.
func TestServeFormatFlags(t *testing.T) {
	base := []string{"serve", "--brokers", "localhost:1", "--topic", "in", "--dead-letter-topic", "dead", "--model", "m.mvml"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--output-topic", "out", "--format", "avro"}, `--format: format "avro": want json or arrow`},
		{[]string{"--output-topic", "out", "--output-format", "parquet"}, `--output-format: format "parquet": want json or arrow`},
		{[]string{"--output-dir", ".", "--output-format", "arrow"}, "--output-format is for --output-topic"},
		{[]string{"--output-dir", ".", "--output-format", "json"}, "--output-format is for --output-topic"},
	} {
		if code, _, stderr := mvml(t, append(base, tc.args...)...); code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("mvml %v: exit %d, stderr %q, want usage error %q", tc.args, code, stderr, tc.want)
		}
	}
}
