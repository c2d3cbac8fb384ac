package kafkaconn

import (
	"maps"
	"slices"
	"testing"

	"github.com/segmentio/kafka-go"
)

// Every member gets the same partition numbers of the records topic and of
// the labels topic, whatever order the metadata lists the partitions in.
func TestCopartitionedAssignment(t *testing.T) {
	members := []kafka.GroupMember{{ID: "b", Topics: []string{"in", "labels"}}, {ID: "a", Topics: []string{"in", "labels"}}, {ID: "c", Topics: []string{"in", "labels"}}}
	for name, order := range map[string][]int{
		"numeric":  {0, 1, 2, 3, 4},
		"reversed": {4, 3, 2, 1, 0},
		"crossed":  {2, 0, 4, 1, 3},
	} {
		t.Run(name, func(t *testing.T) {
			var partitions []kafka.Partition
			for i, p := range order {
				partitions = append(partitions, kafka.Partition{Topic: "in", ID: p}, kafka.Partition{Topic: "labels", ID: order[len(order)-1-i]})
			}
			got := copartitioned{}.AssignGroups(members, partitions)
			var all []int
			for _, id := range slices.Sorted(maps.Keys(got)) {
				in, labels := slices.Sorted(slices.Values(got[id]["in"])), slices.Sorted(slices.Values(got[id]["labels"]))
				if !slices.Equal(in, labels) {
					t.Errorf("member %s: records %v, labels %v", id, in, labels)
				}
				all = append(all, in...)
			}
			if slices.Sort(all); !slices.Equal(all, []int{0, 1, 2, 3, 4}) {
				t.Errorf("assigned partitions %v, want each of 0–4 once", all)
			}
		})
	}
}
