package main

import (
	"context"
	"fmt"
	"net"
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
	topics := fs.String("topics", "", "`NAMES` of the topics to create, comma-separated, each with --partitions partitions")
	partitions := fs.Int("partitions", 1, "`N` partitions of every topic of --topics, and of a topic created by a client producing to it")
	modelTopics := fs.String("model-topics", "", "`NAMES` of the model topics to create, comma-separated: one partition, cleanup.policy=compact")
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if *partitions < 1 {
		return usagef("--partitions %d: want at least 1", *partitions)
	}
	plain, compacted := splitNames(*topics), splitNames(*modelTopics)
	if name, ok := firstRepeated(append(plain, compacted...)); ok {
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
	for _, name := range plain {
		if err := broker.CreateTopic(name, int32(*partitions), nil); err != nil {
			return fmt.Errorf("creating topic %s: %w", name, err)
		}
	}
	for _, name := range compacted {
		if err := broker.CreateTopic(name, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
			return fmt.Errorf("creating model topic %s: %w", name, err)
		}
	}
	addr := strings.Join(broker.ListenAddrs(), ",")
	fmt.Fprintf(a.stdout, "development broker at %s: in memory, every message is lost when it stops; not for production\n", addr)
	for _, name := range plain {
		fmt.Fprintf(a.stdout, "  topic %s: %s\n", name, partitionsText(*partitions))
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
