package sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"
	"testing"

	"github.com/mvml/mvml/schemas"
)

func decodeRejects(t *testing.T, data []byte) []schemas.RowError {
	t.Helper()
	var out []schemas.RowError
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var e schemas.RowError
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func TestRejectsRoundTrip(t *testing.T) {
	batches := [][]schemas.RowError{
		{
			{Source: "train.csv.gz", Row: 3, Column: "x_7", Reason: "view x feature 7 is NaN"},
			{Source: "train.csv.gz", Row: 9, Column: "label", Reason: "label is missing"},
		},
		nil,
		{
			{Source: "topic/2", Row: 0, Reason: "record is not \"valid\"\nat all <>&"},
			{Row: -1, Reason: "header: unknown column"},
		},
	}
	var buf bytes.Buffer
	r := NewRejects(&buf)
	var want []schemas.RowError
	for _, b := range batches {
		if err := r.Write(b...); err != nil {
			t.Fatal(err)
		}
		want = append(want, b...)
	}
	if r.Count() != int64(len(want)) {
		t.Errorf("Count %d, want %d", r.Count(), len(want))
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := decodeRejects(t, buf.Bytes())
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), buf.Bytes())
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("line %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if err := r.Write(want[0]); !errors.Is(err, errClosed) {
		t.Errorf("Write after Close: %v", err)
	}
}

func TestRejectsWriteFailure(t *testing.T) {
	r := NewRejects(&failingWriter{n: 10})
	err := r.Write(schemas.RowError{Row: 1, Reason: "bad"})
	if !errors.Is(err, errDiskFull) {
		t.Fatalf("Write: %v, want %v", err, errDiskFull)
	}
	if r.Count() != 0 {
		t.Errorf("Count %d after a failed write, want 0", r.Count())
	}
}

func TestRejectsConcurrentWritersKeepLinesWhole(t *testing.T) {
	const writers, perWriter = 8, 50
	var buf bytes.Buffer
	r := NewRejects(&buf)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				e := schemas.RowError{Source: fmt.Sprintf("part-%d", w), Row: int64(i), Reason: "bad"}
				if err := r.Write(e, e); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got := decodeRejects(t, buf.Bytes())
	if len(got) != 2*writers*perWriter || r.Count() != int64(len(got)) {
		t.Fatalf("%d lines, Count %d, want %d", len(got), r.Count(), 2*writers*perWriter)
	}
	// Each Write's two lines arrive together.
	for i := 0; i < len(got); i += 2 {
		if !reflect.DeepEqual(got[i], got[i+1]) {
			t.Fatalf("lines %d and %d split apart: %+v, %+v", i, i+1, got[i], got[i+1])
		}
	}
}

func BenchmarkRejects(b *testing.B) {
	errs := make([]schemas.RowError, 256)
	for i := range errs {
		errs[i] = schemas.RowError{Source: "train.csv.gz", Row: int64(i), Column: "x_12", Reason: "view x feature 12 is NaN"}
	}
	r := NewRejects(io.Discard)
	b.ResetTimer()
	for range b.N {
		if err := r.Write(errs...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(errs))/b.Elapsed().Seconds(), "rows/s")
}
