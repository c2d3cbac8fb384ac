package statsbus

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// Offsets added in any order, repeated or not, end up as the fewest sorted
// runs.
func TestRunsAdd(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offsets []int64
		runs    []Run // added after the offsets
		want    Runs
	}{
		{"none", nil, nil, nil},
		{"one", []int64{7}, nil, Runs{{7, 8}}},
		{"in order", []int64{3, 4, 5, 6}, nil, Runs{{3, 7}}},
		{"backwards", []int64{6, 5, 4, 3}, nil, Runs{{3, 7}}},
		{"repeated", []int64{4, 4, 5, 4}, nil, Runs{{4, 6}}},
		{"gap", []int64{1, 2, 5, 6}, nil, Runs{{1, 3}, {5, 7}}},
		{"gap filled", []int64{1, 2, 5, 6, 4, 3}, nil, Runs{{1, 7}}},
		{"shuffled", []int64{10, 2, 11, 0, 1, 20, 12}, nil, Runs{{0, 3}, {10, 13}, {20, 21}}},
		{"run joins three", []int64{1, 5, 9}, []Run{{2, 9}}, Runs{{1, 10}}},
		{"run inside", []int64{1, 2, 3, 4}, []Run{{2, 3}}, Runs{{1, 5}}},
		{"run before", []int64{10}, []Run{{0, 5}}, Runs{{0, 5}, {10, 11}}},
		{"run touching both", []int64{0, 10}, []Run{{1, 10}}, Runs{{0, 11}}},
		{"empty run", []int64{3}, []Run{{5, 5}, {6, 2}}, Runs{{3, 4}}},
		{"offset zero", []int64{0}, nil, Runs{{0, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rs Runs
			for _, o := range tc.offsets {
				rs.Add(o)
			}
			for _, r := range tc.runs {
				rs.AddRun(r)
			}
			if !slices.Equal(rs, tc.want) {
				t.Errorf("runs %v, want %v", rs, tc.want)
			}
			if err := rs.check(); len(rs) > 0 && err != nil {
				t.Errorf("runs made by Add fail their check: %v", err)
			}
			var count int64
			for _, r := range tc.want {
				count += r.To - r.From
			}
			if rs.Count() != count {
				t.Errorf("count %d, want %d", rs.Count(), count)
			}
		})
	}
}

func TestRunsContains(t *testing.T) {
	rs := Runs{{2, 4}, {10, 11}, {20, 30}}
	for off, want := range map[int64]bool{0: false, 1: false, 2: true, 3: true, 4: false, 9: false, 10: true, 11: false, 19: false, 20: true, 29: true, 30: false, 1000: false} {
		if got := rs.Contains(off); got != want {
			t.Errorf("Contains(%d) = %t, want %t", off, got, want)
		}
	}
	if (Runs{}).Contains(0) {
		t.Error("empty runs contain 0")
	}
}

// Overlap finds the first offsets two sets of runs share, and only those.
func TestRunsOverlap(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b Runs
		want Run
		ok   bool
	}{
		{"empty", nil, Runs{{0, 5}}, Run{}, false},
		{"disjoint", Runs{{0, 5}}, Runs{{5, 10}}, Run{}, false},
		{"interleaved", Runs{{0, 2}, {4, 6}, {8, 10}}, Runs{{2, 4}, {6, 8}}, Run{}, false},
		{"same", Runs{{3, 7}}, Runs{{3, 7}}, Run{3, 7}, true},
		{"partial", Runs{{0, 5}}, Runs{{4, 9}}, Run{4, 5}, true},
		{"inside", Runs{{0, 100}}, Runs{{40, 41}}, Run{40, 41}, true},
		{"late", Runs{{0, 2}, {4, 6}, {8, 10}}, Runs{{2, 4}, {9, 20}}, Run{9, 10}, true},
		{"first of several", Runs{{0, 10}}, Runs{{2, 3}, {5, 6}}, Run{2, 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, pair := range [][2]Runs{{tc.a, tc.b}, {tc.b, tc.a}} {
				got, ok := pair[0].Overlap(pair[1])
				if got != tc.want || ok != tc.ok {
					t.Errorf("%v overlap %v = %v, %t; want %v, %t", pair[0], pair[1], got, ok, tc.want, tc.ok)
				}
			}
		})
	}
}

// Ranges keep one range per partition in order, and overlap only within
// one partition of one topic.
func TestRanges(t *testing.T) {
	var rs Ranges
	rs.Add("labels", 2, 10)
	rs.Add("labels", 0, 5)
	rs.Add("labels", 2, 11)
	rs.Add("clicks", 1, 7)
	rs.Add("labels", 0, 4)
	want := Ranges{
		{Topic: "clicks", Partition: 1, Runs: Runs{{7, 8}}},
		{Topic: "labels", Partition: 0, Runs: Runs{{4, 6}}},
		{Topic: "labels", Partition: 2, Runs: Runs{{10, 12}}},
	}
	if !rangesEqual(rs, want) {
		t.Fatalf("ranges %v, want %v", rs, want)
	}
	if err := rs.check(); err != nil {
		t.Errorf("ranges made by Add fail their check: %v", err)
	}
	if rs.Count() != 5 {
		t.Errorf("count %d, want 5", rs.Count())
	}
	if got := rs.Runs("labels", 2); !slices.Equal(got, Runs{{10, 12}}) {
		t.Errorf("runs of labels/2: %v", got)
	}
	if got := rs.Runs("labels", 1); got != nil {
		t.Errorf("runs of a partition without offsets: %v", got)
	}

	for _, tc := range []struct {
		name  string
		other Ranges
		want  Range
		ok    bool
	}{
		{"other partition", Ranges{{Topic: "labels", Partition: 1, Runs: Runs{{4, 12}}}}, Range{}, false},
		{"other topic", Ranges{{Topic: "clicks", Partition: 0, Runs: Runs{{4, 6}}}}, Range{}, false},
		{"next offsets", Ranges{{Topic: "labels", Partition: 2, Runs: Runs{{12, 20}}}}, Range{}, false},
		{"a repeat", Ranges{{Topic: "labels", Partition: 0, Runs: Runs{{5, 6}}}}, Range{Topic: "labels", Partition: 0, Runs: Runs{{5, 6}}}, true},
		{"second partition", Ranges{
			{Topic: "labels", Partition: 0, Runs: Runs{{6, 9}}},
			{Topic: "labels", Partition: 2, Runs: Runs{{0, 11}}},
		}, Range{Topic: "labels", Partition: 2, Runs: Runs{{10, 11}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := rs.Overlap(tc.other)
			if ok != tc.ok || !rangesEqual(Ranges{got}, Ranges{tc.want}) {
				t.Errorf("overlap %v, %t; want %v, %t", got, ok, tc.want, tc.ok)
			}
		})
	}

	merged := slices.Clone(rs)
	merged.AddAll(Ranges{{Topic: "labels", Partition: 2, Runs: Runs{{12, 14}}}, {Topic: "labels", Partition: 3, Runs: Runs{{0, 2}}}})
	if got := merged.Runs("labels", 2); !slices.Equal(got, Runs{{10, 14}}) {
		t.Errorf("merged runs of labels/2: %v", got)
	}
	if merged.Count() != 9 {
		t.Errorf("merged count %d, want 9", merged.Count())
	}
}

func rangesEqual(a, b Ranges) bool {
	return slices.EqualFunc(a, b, func(x, y Range) bool {
		return x.Topic == y.Topic && x.Partition == y.Partition && slices.Equal(x.Runs, y.Runs)
	})
}

// Runs are written as [from, to] pairs, and ranges read from a delta must
// be in the form Add keeps them in.
func TestRangesJSON(t *testing.T) {
	var rs Ranges
	for _, o := range []int64{100, 101, 102, 200} {
		rs.Add("labels", 3, o)
	}
	js, err := json.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"topic":"labels","partition":3,"runs":[[100,103],[200,201]]}]`; string(js) != want {
		t.Errorf("JSON %s, want %s", js, want)
	}
	var back Ranges
	if err := json.Unmarshal(js, &back); err != nil || !rangesEqual(back, rs) {
		t.Errorf("read back %v (%v), want %v", back, err, rs)
	}
	for _, tc := range []struct {
		name, js, want string
	}{
		{"empty run", `[{"topic":"l","partition":0,"runs":[[5,5]]}]`, "run [5,5) is empty"},
		{"backwards run", `[{"topic":"l","partition":0,"runs":[[5,2]]}]`, "is empty or negative"},
		{"negative", `[{"topic":"l","partition":0,"runs":[[-3,2]]}]`, "is empty or negative"},
		{"touching runs", `[{"topic":"l","partition":0,"runs":[[0,2],[2,4]]}]`, "run [2,4) overlaps, touches or precedes run [0,2)"},
		{"unsorted runs", `[{"topic":"l","partition":0,"runs":[[5,6],[0,2]]}]`, "precedes"},
		{"no runs", `[{"topic":"l","partition":0,"runs":[]}]`, "topic l partition 0: no runs"},
		{"no topic", `[{"topic":"","partition":0,"runs":[[0,1]]}]`, "range 0 has no topic"},
		{"negative partition", `[{"topic":"l","partition":-1,"runs":[[0,1]]}]`, "partition -1"},
		{"repeated partition", `[{"topic":"l","partition":0,"runs":[[0,1]]},{"topic":"l","partition":0,"runs":[[5,6]]}]`, "out of order or repeated"},
		{"unsorted partitions", `[{"topic":"l","partition":1,"runs":[[0,1]]},{"topic":"l","partition":0,"runs":[[5,6]]}]`, "out of order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rs Ranges
			if err := json.Unmarshal([]byte(tc.js), &rs); err != nil {
				t.Fatal(err)
			}
			if err := rs.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("check: %v, want %q", err, tc.want)
			}
		})
	}
	var r Run
	if err := json.Unmarshal([]byte(`[1,2,3]`), &r); err == nil {
		t.Error("a run of three offsets: no error")
	}
}
