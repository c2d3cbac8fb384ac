package serve

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/sink"
)

// noGoroutinesIn waits until no goroutine's stack holds a frame of fn
// (a function name as runtime.Stack prints it), and fails after 10 s.
func noGoroutinesIn(t *testing.T, fn string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, fn) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines of %s left running:\n%s", fn, stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The results come in the items' order however the work completes: the
// first item's work waits until the second's is done. No more than
// inFlight items are taken and not freed at once, and the stage's
// goroutines end with it.
func TestOrderedWorkKeepsOrder(t *testing.T) {
	for _, tt := range []struct{ workers, inFlight, items int }{
		{2, 2, 10}, {2, 4, 50}, {4, 8, 200},
	} {
		in := make(chan int)
		var held, maxHeld atomic.Int64
		go func() {
			defer close(in)
			for i := range tt.items {
				in <- i
				// Taken: the stage has room for it.
				n := held.Add(1)
				for m := maxHeld.Load(); n > m && !maxHeld.CompareAndSwap(m, n); m = maxHeld.Load() {
				}
			}
		}()
		secondDone := make(chan struct{})
		var mu sync.Mutex
		var completed []int
		o := startOrdered(context.Background(), in, tt.workers, tt.inFlight, func(_ context.Context, slot, item int) int {
			if item == 0 {
				<-secondDone
			}
			mu.Lock()
			completed = append(completed, item)
			mu.Unlock()
			if item == 1 {
				close(secondDone)
			}
			return item * item
		})
		var got []int
		for tk := range o.results() {
			got = append(got, tk.wait())
			held.Add(-1)
			o.free(tk)
		}
		o.stop(func(int) { t.Error("a result left to stop") })
		want := make([]int, tt.items)
		for i := range want {
			want[i] = i * i
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+v: results %v, want %v", tt, got, want)
		}
		if slices.Index(completed, 0) < slices.Index(completed, 1) {
			t.Errorf("%+v: completed in the order %v: the first item's work was to end after the second's", tt, completed)
		}
		// The producer counts an item once its send returned, so a count
		// may lag by the one the stage is taking.
		if m := maxHeld.Load(); m > int64(tt.inFlight)+1 {
			t.Errorf("%+v: %d items held at once, want at most %d", tt, m, tt.inFlight)
		}
	}
	noGoroutinesIn(t, "pipeline.startOrdered")
}

// Stopping the stage mid-stream ends its goroutines and releases every
// result the consumer did not take, and nothing twice.
func TestOrderedWorkStop(t *testing.T) {
	in := make(chan int)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var produced atomic.Int64
	go func() {
		for i := 0; ; i++ {
			select {
			case in <- i:
				produced.Add(1)
			case <-ctx.Done():
				return
			}
		}
	}()
	var cancelledWork atomic.Int64
	o := startOrdered(ctx, in, 2, 4, func(ctx context.Context, _, item int) int {
		if ctx.Err() != nil {
			cancelledWork.Add(1)
		}
		time.Sleep(time.Millisecond)
		return item
	})
	var taken []int
	for tk := range o.results() {
		taken = append(taken, tk.wait())
		o.free(tk)
		if len(taken) == 20 {
			break
		}
	}
	var released []int
	o.stop(func(v int) { released = append(released, v) })
	cancel()
	all := append(slices.Clone(taken), released...)
	for i, v := range all {
		if v != i {
			t.Fatalf("taken %v then released %v: want each item once, in order", taken, released)
		}
	}
	if len(released) > 4 {
		t.Errorf("%d results released, want at most the 4 in flight", len(released))
	}
	noGoroutinesIn(t, "pipeline.startOrdered")
}

// ackLog records the order in which the batches of a chanSource are
// acknowledged.
type ackLog struct {
	mu    sync.Mutex
	order []int
}

func (a *ackLog) ack(seq int) func(context.Context) error {
	return func(context.Context) error {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.order = append(a.order, seq)
		return nil
	}
}

// A slow first batch (a thousand times the rows of the next ones) is
// scored while the workers go on with the batches after it: they are
// written and acknowledged in input order all the same, and the output
// holds the records in input order.
func TestServeCommitsInOrderWhenScoredOutOfOrder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	sizes := []int{20_000, 10, 10, 10, 10, 10, 10, 10}
	total := 0
	for _, n := range sizes {
		total += n
	}
	d := makeData(spec, total, 4)
	for _, tt := range []struct{ workers, inFlight int }{{1, 1}, {2, 2}, {2, 8}, {4, 6}} {
		src := make(chanSource, len(sizes))
		var acks ackLog
		lo := 0
		for seq, n := range sizes {
			b := labelledBatch(mem, spec, d, lo, lo+n)
			b.Ack = acks.ack(seq)
			src <- b
			lo += n
		}
		close(src)
		var out bytes.Buffer
		svc, err := NewService(Config{Model: m, Source: src, Output: sink.NewJSONL(&out), DeadLetters: sink.NewRejects(io.Discard),
			Workers: tt.workers, InFlight: tt.inFlight, Allocator: mem})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(acks.order, want) {
			t.Errorf("%+v: batches acknowledged in the order %v, want %v", tt, acks.order, want)
		}
		lines := decodeLines[serveLine](t, out.Bytes())
		ids := make([]int64, len(lines))
		for i, l := range lines {
			ids[i] = l.ID
		}
		if !slices.Equal(ids, d.IDs) {
			t.Errorf("%+v: %d output rows, not the %d records in input order", tt, len(ids), len(d.IDs))
		}
		if st := svc.Stats(); st.Scored != int64(total) || st.Batches != int64(len(sizes)) || st.NotCommitted != 0 {
			t.Errorf("%+v: stats %+v", tt, st)
		}
	}
	noGoroutinesIn(t, "pipeline.startOrdered")
	noGoroutinesIn(t, "pipeline.(*Service).prefetch")
}

// A model put in service while batches are scored ahead serves every
// batch from its turn on: the batches scored by the old one are scored
// again, and no score of the old model follows one of the new.
func TestServeSwapWhileScoringAhead(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	spec := testSpec(t)
	m1 := trainTestModel(t, spec, makeData(spec, 150, 1))
	m2 := trainTestModel(t, spec, makeData(spec, 150, 2))
	d := makeData(spec, 2000, 5)
	src := make(chanSource)
	var out bytes.Buffer
	written := make(chan struct{}, 100)
	svc, err := NewService(Config{Model: m1, Source: src, Output: notifySink{sink.NewJSONL(&out), written}, DeadLetters: sink.NewRejects(io.Discard),
		Workers: 2, InFlight: 8, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	go func() {
		defer close(src)
		for lo := 0; lo < d.Rows(); lo += 100 {
			select {
			case src <- labelledBatch(mem, spec, d, lo, lo+100):
			case <-ctx.Done():
				return
			}
		}
	}()
	<-written // the first batch is out: the others are in flight
	if err := svc.Swap(ctx, m2); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := decodeLines[serveLine](t, out.Bytes())
	if len(lines) != d.Rows() {
		t.Fatalf("%d output rows, want %d", len(lines), d.Rows())
	}
	_, pred2 := pipelinetest.ExpectedScores(m2, d)
	switched := false
	for i, l := range lines {
		switch {
		case l.Version == m2.Version:
			switched = true
			if l.Pred != pred2[i] {
				t.Fatalf("row %d: prediction %v, want m2's %v", i, l.Pred, pred2[i])
			}
		case switched:
			t.Fatalf("row %d scored by %s after rows scored by the swapped model %s", i, l.Version, m2.Version)
		}
	}
	if !switched || lines[0].Version != m1.Version {
		t.Errorf("first row by %s, swapped model seen: %v", lines[0].Version, switched)
	}
}

// notifySink signals every write it made.
type notifySink struct {
	sink.Sink
	written chan<- struct{}
}

func (n notifySink) Write(ctx context.Context, rec arrow.Record) error {
	if err := n.Sink.Write(ctx, rec); err != nil {
		return err
	}
	select {
	case n.written <- struct{}{}:
	default:
	}
	return nil
}
