package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
)

// fleetPartitions is the partition count of the fleet's input topic.
const fleetPartitions = 6

// fleet is a consumer group of `mvml serve` replicas, each a process of
// its own, on the in-process broker over TCP, scoring records produced at
// a steady pace, with the defaults of the group's timings: it notes when
// each record was produced and when each score was written, so that the
// stalls of the group (records wait and none is scored) can be measured.
type fleet struct {
	t        *testing.T
	c        *kafkatest.Cluster
	model    string
	rows     []map[string]any // record values, cycled
	replicas []*process

	mu       sync.Mutex
	produced []time.Time // by id
	scores   []scoreEvent
	prodErr  error

	// stopProducing ends the producer, stopWatching the watch of the
	// scores.
	stopProducing, stopWatching context.CancelFunc
	producing, watching         sync.WaitGroup
}

// scoreEvent is a score written: the record's id and when (the score
// message's timestamp, set by the replica's writer).
type scoreEvent struct {
	id int
	at time.Time
}

// startFleet starts the broker and n replicas, and produces a record to
// each partition in turn every interval/fleetPartitions while watching
// the scores; it returns once every replica is ready.
func startFleet(t *testing.T, n int, interval time.Duration) *fleet {
	t.Helper()
	dir := t.TempDir()
	streamCSV, modelPath := trainedForServe(t, dir, 200)
	f := &fleet{t: t, model: modelPath}
	for _, msg := range csvMessages(t, streamCSV, false) {
		var rec map[string]any
		if err := json.Unmarshal(msg, &rec); err != nil {
			t.Fatal(err)
		}
		f.rows = append(f.rows, rec)
	}
	f.c = kafkatest.Start(t, fleetPartitions, "records")
	for _, topic := range []string{"scores", "dead"} {
		if err := f.c.Fake().CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		f.replicas = append(f.replicas, f.startReplica(i))
	}
	for _, p := range f.replicas {
		f.waitReady(p)
	}
	produceCtx, stopProducing := context.WithCancel(context.Background())
	watchCtx, stopWatching := context.WithCancel(context.Background())
	f.stopProducing, f.stopWatching = stopProducing, stopWatching
	f.producing.Go(func() { f.produce(produceCtx, interval) })
	f.watching.Go(func() { f.watch(watchCtx) })
	t.Cleanup(func() {
		f.stopProduction()
		f.stopWatching()
		f.watching.Wait()
	})
	return f
}

// startReplica starts replica i with the group's default timings.
func (f *fleet) startReplica(i int) *process {
	name := fmt.Sprintf("r%d", i)
	return startProcess(f.t, name, "serve", "--brokers", strings.Join(f.c.Brokers, ","), "--group", "g", "--topic", "records",
		"--output-topic", "scores", "--dead-letter-topic", "dead", "--model", f.model, "--max-wait", "20ms", "--http", "127.0.0.1:0")
}

// waitReady waits until p's /readyz answers 200.
func (f *fleet) waitReady(p *process) {
	f.t.Helper()
	p.waitHTTP(f.t)
	ready := strings.TrimSuffix(p.metrics, "/metrics") + "/readyz"
	deadline := time.Now().Add(60 * time.Second)
	for {
		if status, _ := httpGet(ready); status == 200 {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s not ready:\n%s", p.name, p.said())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restart stops replica i as an orchestrator does (SIGTERM), starts it
// again and waits until it is ready.
func (f *fleet) restart(i int) {
	f.t.Helper()
	if code := f.replicas[i].stop(f.t); code != exitOK {
		f.t.Fatalf("%s: exit %d:\n%s", f.replicas[i].name, code, f.replicas[i].said())
	}
	f.replicas[i] = f.startReplica(i)
	f.waitReady(f.replicas[i])
}

// produce writes a record to each partition in turn, one every
// interval/fleetPartitions, until ctx ends; a record's time is when the
// broker acknowledged it.
func (f *fleet) produce(ctx context.Context, interval time.Duration) {
	w := &kafka.Writer{Addr: kafka.TCP(f.c.Brokers...), Topic: "records", RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition }), Transport: &kafka.Transport{}}
	defer w.Close()
	tick := time.NewTicker(interval / fleetPartitions)
	defer tick.Stop()
	for id := 0; ; id++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rec := f.rows[id%len(f.rows)]
		rec["id"] = id
		value, err := json.Marshal(rec)
		if err == nil {
			err = w.WriteMessages(ctx, kafka.Message{Partition: id % fleetPartitions, Key: []byte(strconv.Itoa(id)), Value: value})
		}
		f.mu.Lock()
		if err != nil {
			if ctx.Err() == nil && f.prodErr == nil {
				f.prodErr = err
			}
			f.mu.Unlock()
			return
		}
		f.produced = append(f.produced, time.Now())
		f.mu.Unlock()
	}
}

// watch reads the scores until ctx ends.
func (f *fleet) watch(ctx context.Context) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: f.c.Brokers, Topic: "scores", Partition: 0, MaxWait: 100 * time.Millisecond, ReadLagInterval: -1})
	defer r.Close()
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return
		}
		id, err := strconv.Atoi(string(m.Key))
		if err != nil {
			continue
		}
		f.mu.Lock()
		f.scores = append(f.scores, scoreEvent{id, m.Time})
		f.mu.Unlock()
	}
}

// stopProduction stops the producer.
func (f *fleet) stopProduction() {
	f.stopProducing()
	f.producing.Wait()
}

// settle waits for d with the producer running, and fails the test if it
// failed.
func (f *fleet) settle(d time.Duration) {
	f.t.Helper()
	time.Sleep(d)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.prodErr != nil {
		f.t.Fatalf("producing: %v", f.prodErr)
	}
}

// stall is a stretch in which records waited and none was scored.
type stall struct{ from, to time.Time }

func (s stall) length() time.Duration { return s.to.Sub(s.from) }

// stalls are the stretches up to now in which records of the partitions
// in parts waited and none of them was scored: between two of their
// scores written (or after the last), from the later of the first and the
// oldest of their records not scored by the second.
func (f *fleet) stalls(parts ...int) []stall {
	f.mu.Lock()
	produced, scores := slices.Clone(f.produced), slices.Clone(f.scores)
	f.mu.Unlock()
	now := time.Now()
	mine := func(id int) bool { return id < len(produced) && slices.Contains(parts, id%fleetPartitions) }
	never := time.Unix(math.MaxInt32, 0)
	first := map[int]time.Time{}
	var times []time.Time
	for _, e := range scores {
		if !mine(e.id) {
			continue
		}
		times = append(times, e.at)
		if t, ok := first[e.id]; !ok || e.at.Before(t) {
			first[e.id] = e.at
		}
	}
	// Their records by first score, unscored last, with the oldest
	// production among those scored at or after each.
	var ids []int
	for id := range produced {
		if mine(id) {
			ids = append(ids, id)
		}
	}
	firstOf := func(id int) time.Time {
		if t, ok := first[id]; ok {
			return t
		}
		return never
	}
	slices.SortFunc(ids, func(a, b int) int { return firstOf(a).Compare(firstOf(b)) })
	oldest := make([]time.Time, len(ids)+1)
	oldest[len(ids)] = never
	for i := len(ids) - 1; i >= 0; i-- {
		oldest[i] = oldest[i+1]
		if p := produced[ids[i]]; p.Before(oldest[i]) {
			oldest[i] = p
		}
	}
	// waitingSince is the oldest production among the records not scored
	// before t.
	waitingSince := func(t time.Time) time.Time {
		i, _ := slices.BinarySearchFunc(ids, t, func(id int, t time.Time) int { return firstOf(id).Compare(t) })
		return oldest[i]
	}
	slices.SortFunc(times, time.Time.Compare)
	times = append(times, now)
	var out []stall
	for i := 1; i < len(times); i++ {
		from := times[i-1]
		if w := waitingSince(times[i]); w.After(from) {
			from = w
		}
		if from.Before(times[i]) {
			out = append(out, stall{from, times[i]})
		}
	}
	return out
}

// allPartitions are the input topic's partitions.
var allPartitions = []int{0, 1, 2, 3, 4, 5}

// longestStall is the longest stall of the partitions in parts that
// overlaps [from, to].
func (f *fleet) longestStall(from, to time.Time, parts ...int) stall {
	var longest stall
	for _, s := range f.stalls(parts...) {
		if s.to.After(from) && s.from.Before(to) && s.length() > longest.length() {
			longest = s
		}
	}
	return longest
}

// longestPartitionStall is the longest stall of any one partition that
// overlaps [from, to], and the partition.
func (f *fleet) longestPartitionStall(from, to time.Time) (stall, int) {
	var longest stall
	at := 0
	for _, p := range allPartitions {
		if s := f.longestStall(from, to, p); s.length() > longest.length() {
			longest, at = s, p
		}
	}
	return longest, at
}

// recovery is the longest time after at until a record of each partition
// was scored, and whether every partition was.
func (f *fleet) recovery(at time.Time) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var firstAfter [fleetPartitions]time.Time
	for _, e := range f.scores {
		p := e.id % fleetPartitions
		if e.at.After(at) && (firstAfter[p].IsZero() || e.at.Before(firstAfter[p])) {
			firstAfter[p] = e.at
		}
	}
	var longest time.Duration
	for _, t := range firstAfter {
		if t.IsZero() {
			return time.Since(at), false
		}
		longest = max(longest, t.Sub(at))
	}
	return longest, true
}

// waitRecovered waits until every partition was scored after at, for up
// to limit, and returns how long that took.
func (f *fleet) waitRecovered(at time.Time, limit time.Duration) time.Duration {
	f.t.Helper()
	for {
		d, ok := f.recovery(at)
		if ok {
			return d
		}
		if d > limit {
			f.t.Errorf("a partition was not scored within %v of the kill", limit)
			return d
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scoredAll stops producing and waits until every record produced was
// scored (at least once).
func (f *fleet) scoredAll(limit time.Duration) {
	f.t.Helper()
	f.stopProduction()
	deadline := time.Now().Add(limit)
	for {
		f.mu.Lock()
		n := len(f.produced)
		seen := make([]bool, n)
		count := 0
		for _, e := range f.scores {
			if e.id < n && !seen[e.id] {
				seen[e.id] = true
				count++
			}
		}
		f.mu.Unlock()
		if count == n {
			return
		}
		if time.Now().After(deadline) {
			f.t.Errorf("%d of %d records scored", count, n)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fleetFigures are what rollFleet measured.
type fleetFigures struct {
	group     stall         // the longest stall of the whole group in the rolling restart
	partition stall         // the longest stall of one partition in it
	recovery  time.Duration // from the kill until each partition was scored
	killGroup stall         // the longest stall of the whole group after the kill
}

// rollFleet runs three replicas, restarts each in turn (SIGTERM, start,
// ready, next), then kills one (kill -9) and starts it again at once, as
// an orchestrator does; it measures the longest stalls of the rolling
// restart and the time until every partition is scored after the kill.
func rollFleet(t *testing.T) fleetFigures {
	f := startFleet(t, 3, 60*time.Millisecond)
	f.settle(3 * time.Second)
	var figures fleetFigures
	from := time.Now()
	for i := range f.replicas {
		f.restart(i)
		t.Logf("%s restarted after %v", f.replicas[i].name, time.Since(from).Round(time.Millisecond))
	}
	f.settle(3 * time.Second)
	figures.group = f.longestStall(from, time.Now(), allPartitions...)
	var part int
	figures.partition, part = f.longestPartitionStall(from, time.Now())
	killed := time.Now()
	f.replicas[0].kill(t)
	f.replicas[0] = f.startReplica(0)
	figures.recovery = f.waitRecovered(killed, 60*time.Second)
	f.settle(time.Second)
	figures.killGroup = f.longestStall(killed, time.Now(), allPartitions...)
	f.scoredAll(60 * time.Second)
	t.Logf("rolling restart of 3 replicas: the group's longest stall %v (%v after the start), a partition's %v (partition %d, %v after the start); "+
		"after a kill -9 and a restart every partition was scored within %v, the group's longest stall %v",
		figures.group.length().Round(time.Millisecond), figures.group.from.Sub(from).Round(time.Millisecond),
		figures.partition.length().Round(time.Millisecond), part, figures.partition.from.Sub(from).Round(time.Millisecond),
		figures.recovery.Round(time.Millisecond), figures.killGroup.length().Round(time.Millisecond))
	// The line scripts/bench-fleet.sh reads.
	t.Logf("fleet figures: partition_stall_s=%.3f group_stall_s=%.3f kill_recovery_s=%.3f kill_group_stall_s=%.3f",
		figures.partition.length().Seconds(), figures.group.length().Seconds(), figures.recovery.Seconds(), figures.killGroup.length().Seconds())
	if t.Failed() {
		for _, p := range f.replicas {
			t.Logf("%s said:\n%s", p.name, p.said())
		}
	}
	return figures
}

// In a rolling restart of three replicas (each stopped with SIGTERM,
// started again and ready before the next) no partition's records wait
// unscored for more than 5s: a replica that stops leaves the group at once
// and the others learn it within a heartbeat of a second and rejoin.
// After a kill -9 (and a restart at once) every partition is scored again
// within 15s: the session timeout of 10s and a heartbeat. Every record is
// scored at least once.
func TestFleetRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three replicas for half a minute")
	}
	// The measure's bounds are the goal's, with room for a busy machine.
	maxStall, maxRecovery := 5*time.Second, 15*time.Second
	if raceEnabled {
		maxStall, maxRecovery = 8*time.Second, 18*time.Second
	}
	got := rollFleet(t)
	if got.partition.length() > maxStall {
		t.Errorf("in the rolling restart a partition's records waited unscored for %v, want at most %v", got.partition.length(), maxStall)
	}
	if got.recovery > maxRecovery {
		t.Errorf("after the kill -9 a partition was scored again only after %v, want at most %v", got.recovery, maxRecovery)
	}
}
