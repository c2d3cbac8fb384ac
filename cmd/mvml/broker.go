package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
)

// runBroker runs the demo's in-process broker (franz-go's kfake) alone,
// until it is interrupted, so that kcat and several mvml processes can
// share it: a development broker, holding everything in memory, for the
// walk-through in examples/ and for trying mvml without a Kafka cluster.
func runBroker(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("broker")
	listen := fs.String("listen", "127.0.0.1:9092", "`HOST:PORT` to listen on; port 0 takes a free port, which is printed")
	topics := fs.String("topics", "", "`TOPICS` to create, comma-separated, each NAME or NAME:N with N partitions (in:6,labels:6,stats:1); a NAME alone has --partitions")
	partitions := fs.Int("partitions", 1, "`N` partitions of every topic of --topics not given a count, and of a topic created by a client producing to it")
	modelTopics := fs.String("model-topics", "", "`NAMES` of the model topics to create, comma-separated: one partition, cleanup.policy=compact")
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if *partitions < 1 || *partitions > maxTopicPartitions {
		return usagef("--partitions %d: want at least 1 and at most %d", *partitions, maxTopicPartitions)
	}
	plain, err := parseTopicCounts(*topics, *partitions)
	if err != nil {
		return usagef("--topics: %v", err)
	}
	compacted := splitNames(*modelTopics)
	for _, name := range compacted {
		if strings.Contains(name, ":") {
			return usagef("--model-topics %q: a model topic has one partition, give its name alone", name)
		}
	}
	names := make([]string, 0, len(plain)+len(compacted))
	for _, t := range plain {
		names = append(names, t.name)
	}
	if name, ok := firstRepeated(append(names, compacted...)); ok {
		return usagef("topic %q is named twice in --topics and --model-topics", name)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", *listen, err)
	}
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(*partitions),
		kfake.ListenFn(func(string, string) (net.Listener, error) { return ln, nil }))
	if err != nil {
		ln.Close()
		return fmt.Errorf("starting the broker: %w", err)
	}
	defer broker.Close()
	for _, t := range plain {
		if err := broker.CreateTopic(t.name, int32(t.partitions), nil); err != nil {
			return fmt.Errorf("creating topic %s: %w", t.name, err)
		}
	}
	for _, name := range compacted {
		if err := broker.CreateTopic(name, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
			return fmt.Errorf("creating model topic %s: %w", name, err)
		}
	}
	addr := strings.Join(broker.ListenAddrs(), ",")
	fmt.Fprintf(a.stdout, "development broker at %s: in memory, every message is lost when it stops; not for production\n", addr)
	for _, t := range plain {
		fmt.Fprintf(a.stdout, "  topic %s: %s\n", t.name, partitionsText(t.partitions))
	}
	for _, name := range compacted {
		fmt.Fprintf(a.stdout, "  model topic %s: 1 partition, compacted\n", name)
	}
	fmt.Fprintf(a.stdout, "other topics are created as clients produce to them, with %s; interrupt (Ctrl-C) to stop\n", partitionsText(*partitions))
	a.log.Info("broker listening", "brokers", addr)
	<-ctx.Done()
	a.log.Info("broker stopped", "brokers", addr)
	return nil
}

func partitionsText(n int) string {
	if n == 1 {
		return "1 partition"
	}
	return fmt.Sprintf("%d partitions", n)
}

// maxTopicPartitions bounds a topic's partition count in --topics and
// --partitions: the in-process broker keeps every partition in memory, and
// a count past it is a typo, not a topology.
const maxTopicPartitions = 10_000

// topicCount is a topic of --topics and its partition count.
type topicCount struct {
	name       string
	partitions int
}

// parseTopicCounts reads --topics: comma-separated NAME or NAME:N entries,
// blanks left out; a NAME alone has def partitions.
func parseTopicCounts(list string, def int) ([]topicCount, error) {
	var out []topicCount
	for _, entry := range splitNames(list) {
		name, count, hasCount := strings.Cut(entry, ":")
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("%q: no topic name before the colon; want NAME or NAME:PARTITIONS", entry)
		}
		t := topicCount{name: name, partitions: def}
		if hasCount {
			n, err := strconv.Atoi(strings.TrimSpace(count))
			if err != nil || n < 1 || n > maxTopicPartitions {
				return nil, fmt.Errorf("%q: partition count %q: want a whole number from 1 to %d", entry, count, maxTopicPartitions)
			}
			t.partitions = n
		}
		out = append(out, t)
	}
	return out, nil
}

// splitNames are the names of a comma-separated list, blanks left out.
func splitNames(list string) []string {
	var names []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// firstRepeated is the first name that occurs twice in names.
func firstRepeated(names []string) (string, bool) {
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return n, true
		}
		seen[n] = true
	}
	return "", false
}
