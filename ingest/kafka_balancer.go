package ingest

import (
	"cmp"
	"slices"

	"github.com/segmentio/kafka-go"
)

// rangeBalancer is the range assignor, kafka-go's, given every topic's
// partitions in order. kafka-go cuts each topic's partitions into ranges
// in the order the metadata lists them, which a broker need not keep alike
// for two topics (kfake lists them in a map's order): a member would then
// own partition p of the records and another partition of the labels, and
// their joins fail. Its protocol is "range", as kafka-go's.
type rangeBalancer struct{ kafka.RangeGroupBalancer }

func (b rangeBalancer) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	sorted := slices.Clone(partitions)
	slices.SortFunc(sorted, func(x, y kafka.Partition) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.ID, y.ID))
	})
	return b.RangeGroupBalancer.AssignGroups(members, sorted)
}
