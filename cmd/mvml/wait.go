package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"

	"github.com/mvml/mvml/kafkaconn"
)

// Defaults of mvml wait.
const (
	defaultWaitTimeout = time.Minute
	waitPoll           = 100 * time.Millisecond
)

// metricCondition is a condition on a metric of /metrics: NAME=V or
// NAME>=V, on the sum of the metric's series.
type metricCondition struct {
	name, op string
	value    float64
}

func (c metricCondition) String() string {
	return c.name + c.op + strconv.FormatFloat(c.value, 'g', -1, 64)
}

func (c metricCondition) holds(v float64) bool {
	if c.op == ">=" {
		return v >= c.value
	}
	return v == c.value
}

var conditionSyntax = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(>=|=)(.+)$`)

func parseCondition(s string) (metricCondition, error) {
	m := conditionSyntax.FindStringSubmatch(s)
	if m == nil {
		return metricCondition{}, fmt.Errorf("condition %q: want NAME=VALUE or NAME>=VALUE, such as mvml_records_scored_total>=500", s)
	}
	v, err := strconv.ParseFloat(m[3], 64)
	if err != nil {
		return metricCondition{}, fmt.Errorf("condition %q: %q is not a number", s, m[3])
	}
	return metricCondition{name: m[1], op: m[2], value: v}, nil
}

// runWait waits, as a script's step, until what the next step needs is
// there: it polls and says nothing when the wait ends, and fails with what
// it saw last after --timeout.
func runWait(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("wait")
	kf := registerKafka(fs, "wait until the Kafka brokers at `HOST:PORT`, comma-separated, answer (and have --topics)")
	topics := fs.String("topics", "", "with --brokers, wait until these `TOPICS`, comma-separated, exist too")
	httpAddr := fs.String("http", "", "wait until the /metrics of the mvml serve or refit at `ADDR` meet every condition given as an argument")
	timeout := fs.Duration("timeout", defaultWaitTimeout, "give up after this long, with exit status 1 and what was seen last")
	// Flags may come after the conditions too.
	var positional []string
	for {
		if err := parseFlagsOnly(a, fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	var conds []metricCondition
	for _, arg := range positional {
		c, err := parseCondition(arg)
		if err != nil {
			return usageError{err}
		}
		conds = append(conds, c)
	}
	switch {
	case (kf.brokers == "") == (*httpAddr == ""):
		return usagef("give --brokers or --http")
	case *httpAddr != "" && len(conds) == 0:
		return usagef("--http needs a condition, such as mvml_records_scored_total>=500")
	case *httpAddr == "" && len(conds) > 0:
		return usagef("conditions are on the /metrics of --http")
	case *topics != "" && kf.brokers == "":
		return usagef("--topics needs --brokers")
	case *timeout <= 0:
		return usagef("--timeout %v must be positive", *timeout)
	}
	var c checks
	kf.check(&c)
	if err := c.err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var try func(context.Context) (bool, string)
	if *httpAddr != "" {
		url := *httpAddr
		if !strings.Contains(url, "://") {
			url = "http://" + url
		}
		url = strings.TrimSuffix(url, "/") + "/metrics"
		try = func(ctx context.Context) (bool, string) { return metricsMeet(ctx, url, conds) }
	} else {
		conn, err := kf.connection()
		if err != nil {
			return err
		}
		client := conn.NewClient(0)
		defer client.Close()
		var names []string
		if *topics != "" {
			names = strings.Split(*topics, ",")
		}
		try = func(ctx context.Context) (bool, string) { return brokersAnswer(ctx, client, names) }
	}
	var said string
	for {
		ok, saw := try(ctx)
		if ok {
			return nil
		}
		if said == "" || ctx.Err() == nil {
			// A try the deadline cut short says less than the one before.
			said = saw
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("not after %v: %s", *timeout, said)
			}
			return ctx.Err()
		case <-time.After(waitPoll):
		}
	}
}

// metricsMeet reads the metrics at url and says whether every condition
// holds, and what it saw.
func metricsMeet(ctx context.Context, url string, conds []metricCondition) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Sprintf("%s does not answer: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Sprintf("%s answers %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(prommodel.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return false, fmt.Sprintf("%s: %v", url, err)
	}
	all := true
	var seen []string
	for _, c := range conds {
		f, ok := families[c.name]
		if !ok {
			all = false
			seen = append(seen, c.name+" absent, want "+c.op+strconv.FormatFloat(c.value, 'g', -1, 64))
			continue
		}
		var sum float64
		for _, m := range f.GetMetric() {
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Untyped != nil:
				sum += m.GetUntyped().GetValue()
			}
		}
		ok = c.holds(sum)
		all = all && ok
		seen = append(seen, fmt.Sprintf("%s %g (want %s%g)", c.name, sum, c.op, c.value))
	}
	return all, strings.Join(seen, ", ")
}

// brokersAnswer says whether the brokers answer a metadata request and
// have the topics named.
func brokersAnswer(ctx context.Context, client *kafkaconn.Client, topics []string) (bool, string) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	meta, err := client.Metadata(rctx, topics...)
	if err != nil {
		return false, fmt.Sprintf("the brokers do not answer: %v", err)
	}
	var missing []string
	for _, name := range topics {
		found := false
		for _, t := range meta.Topics {
			found = found || t.Name == name && t.Err == nil && len(t.Partitions) > 0
		}
		if !found {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return false, "topics missing: " + strings.Join(missing, ", ")
	}
	return true, fmt.Sprintf("%d brokers answer", meta.Brokers)
}
