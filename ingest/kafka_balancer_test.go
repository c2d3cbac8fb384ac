package ingest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/segmentio/kafka-go"
)

// Every member owns the same partition numbers of both topics, whatever
// order the metadata lists the partitions in.
func TestRangeBalancerCoPartitions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ members, partitions int }{{1, 4}, {2, 4}, {3, 4}, {4, 4}, {3, 10}, {5, 3}} {
		t.Run(fmt.Sprintf("%d members, %d partitions", tc.members, tc.partitions), func(t *testing.T) {
			var members []kafka.GroupMember
			for i := range tc.members {
				members = append(members, kafka.GroupMember{ID: fmt.Sprint("member-", i), Topics: []string{"in", "labels"}})
			}
			for range 20 {
				var parts []kafka.Partition
				for _, topic := range []string{"in", "labels"} {
					for p := range tc.partitions {
						parts = append(parts, kafka.Partition{Topic: topic, ID: p})
					}
				}
				rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
				owned := 0
				for member, topics := range (rangeBalancer{}).AssignGroups(members, parts) {
					in, labels := slices.Sorted(slices.Values(topics["in"])), slices.Sorted(slices.Values(topics["labels"]))
					if !slices.Equal(in, labels) {
						t.Fatalf("%s owns partitions %v of the input topic and %v of the labels topic", member, in, labels)
					}
					owned += len(in)
				}
				if owned != tc.partitions {
					t.Fatalf("%d partitions owned of %d", owned, tc.partitions)
				}
			}
		})
	}
}
