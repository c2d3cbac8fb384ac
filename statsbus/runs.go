package statsbus

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Run is the half-open range of offsets [From, To) of one partition.
// It is written in JSON as [from, to].
type Run struct {
	From, To int64
}

// MarshalJSON writes the run as [from, to].
func (r Run) MarshalJSON() ([]byte, error) { return json.Marshal([2]int64{r.From, r.To}) }

// UnmarshalJSON reads a run written as [from, to].
func (r *Run) UnmarshalJSON(data []byte) error {
	var pair []int64
	if err := json.Unmarshal(data, &pair); err != nil || len(pair) != 2 {
		return fmt.Errorf("run %s: want [from, to], two offsets", data)
	}
	r.From, r.To = pair[0], pair[1]
	return nil
}

func (r Run) String() string { return fmt.Sprintf("[%d,%d)", r.From, r.To) }

// Runs are the offsets of one partition as sorted runs, neither
// overlapping nor touching: the labels of a delta are usually one run per
// partition, whatever order they were joined in. The zero value is empty.
type Runs []Run

// Add adds one offset.
func (rs *Runs) Add(offset int64) { rs.AddRun(Run{offset, offset + 1}) }

// AddRun adds the offsets of r, merging the runs it overlaps or touches.
func (rs *Runs) AddRun(r Run) {
	if r.From >= r.To {
		return
	}
	s := *rs
	// s[i:j] are the runs that overlap or touch r.
	i, _ := slices.BinarySearchFunc(s, r.From, func(x Run, from int64) int { return cmp.Compare(x.To, from) })
	j, _ := slices.BinarySearchFunc(s[i:], r.To+1, func(x Run, to int64) int { return cmp.Compare(x.From, to) })
	j += i
	if i < j {
		r.From, r.To = min(r.From, s[i].From), max(r.To, s[j-1].To)
	}
	*rs = slices.Replace(s, i, j, r)
}

// AddAll adds every offset of o.
func (rs *Runs) AddAll(o Runs) {
	for _, r := range o {
		rs.AddRun(r)
	}
}

// Contains reports whether offset is in the runs.
func (rs Runs) Contains(offset int64) bool {
	i, _ := slices.BinarySearchFunc(rs, offset, func(x Run, off int64) int { return cmp.Compare(x.To, off+1) })
	return i < len(rs) && rs[i].From <= offset
}

// Overlap returns the first run of offsets that both rs and o hold, if
// any.
func (rs Runs) Overlap(o Runs) (Run, bool) {
	for i, j := 0, 0; i < len(rs) && j < len(o); {
		if from, to := max(rs[i].From, o[j].From), min(rs[i].To, o[j].To); from < to {
			return Run{from, to}, true
		}
		if rs[i].To <= o[j].To {
			i++
		} else {
			j++
		}
	}
	return Run{}, false
}

// Count is the number of offsets in the runs.
func (rs Runs) Count() int64 {
	var n int64
	for _, r := range rs {
		n += r.To - r.From
	}
	return n
}

// check says why runs read from a delta are not in the form Add keeps
// them in: non-negative, non-empty, sorted, neither overlapping nor
// touching.
func (rs Runs) check() error {
	if len(rs) == 0 {
		return errors.New("no runs")
	}
	for i, r := range rs {
		switch {
		case r.From < 0 || r.From >= r.To:
			return fmt.Errorf("run %v is empty or negative", r)
		case i > 0 && rs[i-1].To >= r.From:
			return fmt.Errorf("run %v overlaps, touches or precedes run %v", r, rs[i-1])
		}
	}
	return nil
}

// Range is the runs of offsets of one partition of a topic.
type Range struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Runs      Runs   `json:"runs"`
}

// Ranges are the offsets of several partitions, one Range per partition
// in order of topic and partition. The zero value is empty.
type Ranges []Range

// find returns where the range of (topic, partition) is or would be.
func (rs Ranges) find(topic string, partition int) (int, bool) {
	return slices.BinarySearchFunc(rs, Range{Topic: topic, Partition: partition}, func(x, y Range) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
}

// Add adds one offset of a partition.
func (rs *Ranges) Add(topic string, partition int, offset int64) {
	rs.add(topic, partition, Runs{{offset, offset + 1}})
}

// AddAll adds every offset of o.
func (rs *Ranges) AddAll(o Ranges) {
	for _, r := range o {
		rs.add(r.Topic, r.Partition, r.Runs)
	}
}

func (rs *Ranges) add(topic string, partition int, runs Runs) {
	i, found := rs.find(topic, partition)
	if !found {
		*rs = slices.Insert(*rs, i, Range{Topic: topic, Partition: partition})
	}
	(*rs)[i].Runs.AddAll(runs)
}

// Runs returns the runs of one partition (nil when it has none).
func (rs Ranges) Runs(topic string, partition int) Runs {
	if i, found := rs.find(topic, partition); found {
		return rs[i].Runs
	}
	return nil
}

// Overlap returns the first partition and run of offsets that both rs and
// o hold, if any: a delta whose labels were already merged.
func (rs Ranges) Overlap(o Ranges) (Range, bool) {
	for _, r := range o {
		if run, ok := rs.Runs(r.Topic, r.Partition).Overlap(r.Runs); ok {
			return Range{Topic: r.Topic, Partition: r.Partition, Runs: Runs{run}}, true
		}
	}
	return Range{}, false
}

// Count is the number of offsets in every partition.
func (rs Ranges) Count() int64 {
	var n int64
	for _, r := range rs {
		n += r.Runs.Count()
	}
	return n
}

// check says why ranges read from a delta are not in the form Add keeps
// them in.
func (rs Ranges) check() error {
	for i, r := range rs {
		switch {
		case r.Topic == "":
			return fmt.Errorf("range %d has no topic", i)
		case r.Partition < 0:
			return fmt.Errorf("topic %s: partition %d", r.Topic, r.Partition)
		case i > 0 && cmp.Or(cmp.Compare(rs[i-1].Topic, r.Topic), cmp.Compare(rs[i-1].Partition, r.Partition)) >= 0:
			return fmt.Errorf("topic %s partition %d: out of order or repeated", r.Topic, r.Partition)
		}
		if err := r.Runs.check(); err != nil {
			return fmt.Errorf("topic %s partition %d: %w", r.Topic, r.Partition, err)
		}
	}
	return nil
}
