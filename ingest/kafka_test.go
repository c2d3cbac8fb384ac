package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mvml/mvml/internal/arrowalloc"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

// kafkaSpec has a flat view a (a_0, a_1), a view b of named columns
// (b_x, b_y, b_z) and a list view c of 2 values.
func kafkaSpec(tb testing.TB) *schemas.ViewSpec {
	tb.Helper()
	spec := &schemas.ViewSpec{Task: schemas.Regression, ID: "id", Label: "label", Views: []schemas.View{
		{Name: "a", Prefix: "a_", Dim: 2},
		{Name: "b", Columns: []string{"b_x", "b_y", "b_z"}},
		{Name: "c", List: "c_list", Dim: 2},
	}}
	if err := spec.Validate(); err != nil {
		tb.Fatal(err)
	}
	return spec
}

// kafkaRow is a decoded row: id, label (nil when null) and the views.
type kafkaRow struct {
	id    int64
	label any
	views [][]float64
}

// viewScratch is where a test decodes a message's views.
func viewScratch(spec *schemas.ViewSpec) [][]float64 {
	vals := make([][]float64, len(spec.Views))
	for l := range vals {
		vals[l] = make([]float64, spec.Views[l].Dimension())
	}
	return vals
}

func decodeOne(d *kafkaDecoder, msg string) (kafkaRow, *rowError) {
	if bad := d.decode([]byte(msg), viewScratch(d.spec)); bad != nil {
		return kafkaRow{}, bad
	}
	r := kafkaRow{id: d.id}
	if d.hasLabel {
		r.label = d.label
	}
	for _, v := range d.vals {
		r.views = append(r.views, slices.Clone(v))
	}
	return r, nil
}

func TestKafkaDecodeRows(t *testing.T) {
	spec := kafkaSpec(t)
	d := newKafkaDecoder(spec, false)
	tests := []struct {
		name string
		msg  string
		want kafkaRow
	}{
		{"arrays", `{"id":1,"label":2.5,"a":[1,2],"b":[3,4,5],"c":[6,7]}`,
			kafkaRow{1, 2.5, [][]float64{{1, 2}, {3, 4, 5}, {6, 7}}}},
		{"flat fields in any order", `{"b_z":5,"a_1":2,"id":-7,"b_x":3,"a_0":1,"b_y":4,"c":[6,7]}`,
			kafkaRow{-7, nil, [][]float64{{1, 2}, {3, 4, 5}, {6, 7}}}},
		{"null label, blanks, unknown fields", " {\n\t\"id\" : 2 , \"label\" : null, \"x\": {\"y\": [1, \"z\", null, true]},\"a\":[ 1e2 , -0.5E-1 ],\"b\":[0,0,0],\"c\":[1.5,2],\"a_7\":\"ignored\",\"note\":\"ok\" } \r\n",
			kafkaRow{2, nil, [][]float64{{100, -0.05}, {0, 0, 0}, {1.5, 2}}}},
		{"fields mvml does not read may be given twice", `{"id":3,"note":1,"a":[1,2],"note":"x","b":[3,4,5],"c":[6,7],"a_7":0,"a_7":1,"c_list":0,"c_list":1}`,
			kafkaRow{3, nil, [][]float64{{1, 2}, {3, 4, 5}, {6, 7}}}},
		{"escaped field names", `{"\u0069d":4,"\u0061":[1,2],"b_\u0078":3,"b_y":4,"b_z":5,"c":[6,7],"\ud83d\ude00":1}`,
			kafkaRow{4, nil, [][]float64{{1, 2}, {3, 4, 5}, {6, 7}}}},
		{"long and tiny numbers", `{"id":9223372036854775807,"label":-0,"a":[0.1234567890123456789,1e-400],"b":[1.7976931348623157e308,5e-324,-3],"c":[12345678901234567890,0]}`,
			kafkaRow{math.MaxInt64, 0.0, [][]float64{{0.12345678901234568, 0}, {math.MaxFloat64, 5e-324, -3}, {12345678901234567890, 0}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, bad := decodeOne(d, tt.msg)
			if bad != nil {
				t.Fatalf("rejected: column %q: %s", bad.column, bad.reason)
			}
			if got.id != tt.want.id || got.label != tt.want.label {
				t.Errorf("id %d label %v, want %d %v", got.id, got.label, tt.want.id, tt.want.label)
			}
			for l := range tt.want.views {
				if !slices.Equal(got.views[l], tt.want.views[l]) {
					t.Errorf("view %d = %v, want %v", l, got.views[l], tt.want.views[l])
				}
			}
		})
	}
}

// kafkaBadMessages are malformed messages with the column and a part of
// the reason of their reject.
var kafkaBadMessages = []struct {
	name, msg, column, reason string
}{
	{"invalid JSON", `{"id":1,"a":[1,2]`, "", "invalid JSON: unexpected end of input"},
	{"invalid JSON in an ignored field", `{"x":[1,},"id":1,"a":[1,2],"b":[1,2,3],"c":[1,2]}`, "", "invalid JSON: unexpected '}' at offset 8"},
	{"trailing data", `{"id":1,"a":[1,2],"b":[1,2,3],"c":[1,2]} x`, "", "invalid JSON: unexpected 'x' at offset 41 (data after the JSON value)"},
	{"bad escape", `{"i\d":1}`, "", "invalid escape"},
	{"no comma between fields", `{"id":1 "a":[1,2]}`, "", `invalid JSON: unexpected '"' at offset 8 (want ',' or '}' after a field)`},
	{"no comma in a view", `{"id":1,"a":[1 2],"b":[1,2,3],"c":[1,2]}`, "", `invalid JSON: unexpected '2' at offset 15 (want ',' or ']' in an array)`},
	{"no comma in an ignored array", `{"x":[1 2],"id":1}`, "", `invalid JSON: unexpected '2' at offset 8 (want ',' or ']' in an array)`},
	{"no comma in an ignored object", `{"x":{"y":1 "z":2},"id":1}`, "", `invalid JSON: unexpected '"' at offset 12 (want ',' or '}' after a field)`},
	{"not UTF-8 text", "\xff\xfe", "", "invalid JSON: unexpected byte 0xff at offset 0"},
	{"empty", ``, "", "message is empty"},
	{"array", `[1,2]`, "", "message is an array, want a JSON object"},
	{"string", `"id"`, "", "message is a string, want a JSON object"},
	{"number", `12`, "", "message is a number, want a JSON object"},
	{"null", `null`, "", "message is null, want a JSON object"},
	{"deep nesting", `{"x":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, "", "nested deeper than 256 levels"},
	{"id missing", `{"a":[1,2],"b":[1,2,3],"c":[1,2]}`, "id", `id field "id" is missing`},
	{"id a string", `{"id":"1","a":[1,2],"b":[1,2,3],"c":[1,2]}`, "id", "id is a string, want an integer"},
	{"id a fraction", `{"id":1.5,"a":[1,2],"b":[1,2,3],"c":[1,2]}`, "id", `id "1.5" is not an integer`},
	{"id with exponent", `{"id":1e3,"a":[1,2],"b":[1,2,3],"c":[1,2]}`, "id", `id "1e3" is not an integer`},
	{"id null", `{"id":null,"a":[1,2],"b":[1,2,3],"c":[1,2]}`, "id", "id is null, want an integer"},
	{"id too large", `{"id":9223372036854775808,"a":[1,2],"b":[1,2,3],"c":[1,2]}`, "id", "out of the int64 range"},
	{"label a string", `{"id":1,"label":"1","a":[1,2],"b":[1,2,3],"c":[1,2]}`, "label", "label is a string, want a number or null"},
	{"label a boolean", `{"id":1,"label":true,"a":[1,2],"b":[1,2,3],"c":[1,2]}`, "label", "label is a boolean"},
	{"label overflows", `{"id":1,"label":-1e309,"a":[1,2],"b":[1,2,3],"c":[1,2]}`, "label", `label "-1e309" overflows float64`},
	{"view missing", `{"id":1,"a":[1,2],"b":[1,2,3]}`, "c", `view "c" is missing`},
	{"flat view missing a feature", `{"id":1,"a_0":1,"b":[1,2,3],"c":[1,2]}`, "a_1", `view "a" feature 1 (a_1) is missing`},
	{"columns view missing a feature", `{"id":1,"a":[1,2],"b_x":1,"b_z":3,"c":[1,2]}`, "b_y", `view "b" feature 1 (b_y) is missing`},
	{"view too short", `{"id":1,"a":[1],"b":[1,2,3],"c":[1,2]}`, "a", `view "a" has 1 values, want 2`},
	{"view too long", `{"id":1,"a":[1,2],"b":[1,2,3,4],"c":[1,2]}`, "b", `view "b" has 4 values, want 3`},
	{"view empty", `{"id":1,"a":[1,2],"b":[1,2,3],"c":[]}`, "c", `view "c" has 0 values, want 2`},
	{"view not an array", `{"id":1,"a":{"0":1},"b":[1,2,3],"c":[1,2]}`, "a", `view "a" is an object, want an array of 2 numbers`},
	{"item a string", `{"id":1,"a":[1,"2"],"b":[1,2,3],"c":[1,2]}`, "a", `view "a" item 1 is a string, want a number`},
	{"item null", `{"id":1,"a":[1,2],"b":[1,null,3],"c":[1,2]}`, "b", `view "b" item 1 is null, want a number`},
	{"item an array", `{"id":1,"a":[1,2],"b":[1,2,3],"c":[[1],2]}`, "c", `view "c" item 0 is an array, want a number`},
	{"item overflows", `{"id":1,"a":[1,2],"b":[1,2,1e400],"c":[1,2]}`, "b", `view "b" item 2: "1e400" overflows float64`},
	{"item NaN", `{"id":1,"a":[NaN,2],"b":[1,2,3],"c":[1,2]}`, "", "invalid JSON: unexpected 'N' at offset 13"},
	{"item hex", `{"id":1,"a":[0x1,2],"b":[1,2,3],"c":[1,2]}`, "", "invalid JSON: unexpected 'x' at offset 14"},
	{"item leading zero", `{"id":1,"a":[01,2],"b":[1,2,3],"c":[1,2]}`, "", "invalid JSON: unexpected '1' at offset 14"},
	{"feature null", `{"id":1,"a_0":1,"a_1":null,"b":[1,2,3],"c":[1,2]}`, "a_1", `view "a" feature 1 (a_1) is null, want a number`},
	{"feature a string", `{"id":1,"a":[1,2],"b_x":1,"b_y":"2","b_z":3,"c":[1,2]}`, "b_y", `view "b" feature 1 (b_y) is a string, want a number`},
	{"feature overflows", `{"id":1,"a_0":1e999,"a_1":1,"b":[1,2,3],"c":[1,2]}`, "a_0", `view "a" feature 0 (a_0): "1e999" overflows float64`},
	{"both forms", `{"id":1,"a":[1,2],"a_0":1,"a_1":2,"b":[1,2,3],"c":[1,2]}`, "a_0", `view "a" is given both as an array and as flat fields`},
	{"id twice", `{"id":1,"a":[1,2],"b":[1,2,3],"c":[1,2],"id":3}`, "id", `field "id" is given twice`},
	{"id twice, once escaped", `{"id":1,"\u0069d":1,"a":[1,2],"b":[1,2,3],"c":[1,2]}`, "id", `field "id" is given twice`},
	{"label twice", `{"id":1,"label":0,"a":[1,2],"b":[1,2,3],"c":[1,2],"label":1}`, "label", `field "label" is given twice`},
	{"label null, then a number", `{"id":1,"label":null,"label":1,"a":[1,2],"b":[1,2,3],"c":[1,2]}`, "label", `field "label" is given twice`},
	{"view array twice", `{"id":1,"a":[9,9],"b":[1,2,3],"c":[1,2],"a":[1,2]}`, "a", `field "a" is given twice`},
	{"prefix feature twice", `{"id":1,"a_0":1,"a_1":2,"a_0":3,"b":[1,2,3],"c":[1,2]}`, "a_0", `field "a_0" is given twice`},
	{"column feature twice", `{"id":1,"a":[1,2],"b_x":1,"b_y":2,"b_z":3,"b_y":2,"c":[1,2]}`, "b_y", `field "b_y" is given twice`},
}

func TestKafkaDecodeRejects(t *testing.T) {
	d := newKafkaDecoder(kafkaSpec(t), false)
	for _, tt := range kafkaBadMessages {
		t.Run(tt.name, func(t *testing.T) {
			_, bad := decodeOne(d, tt.msg)
			if bad == nil {
				t.Fatal("accepted")
			}
			if bad.column != tt.column || !strings.Contains(bad.reason, tt.reason) {
				t.Errorf("column %q reason %q, want %q containing %q", bad.column, bad.reason, tt.column, tt.reason)
			}
		})
	}
	// The decoder is left ready for the next message.
	if _, bad := decodeOne(d, `{"id":1,"a":[1,2],"b":[1,2,3],"c":[1,2]}`); bad != nil {
		t.Errorf("good message after rejects: %s", bad.reason)
	}
}

func TestKafkaDecodeRequireLabel(t *testing.T) {
	d := newKafkaDecoder(kafkaSpec(t), true)
	for _, msg := range []string{`{"id":1,"a":[1,2],"b":[1,2,3],"c":[1,2]}`, `{"id":1,"label":null,"a":[1,2],"b":[1,2,3],"c":[1,2]}`} {
		if _, bad := decodeOne(d, msg); bad == nil || bad.column != "label" || bad.reason != "label is missing" {
			t.Errorf("%s: %+v, want label is missing", msg, bad)
		}
	}
}

func TestKafkaDecodeDoesNotAllocate(t *testing.T) {
	d := newKafkaDecoder(kafkaSpec(t), false)
	vals := viewScratch(d.spec)
	for _, msg := range []string{
		`{"id":1,"label":2.5,"a":[1,2],"b":[3,4,5],"c":[6,7],"extra":{"k":["v",1.5e300]}}`,
		`{"id":1,"a_0":0.12345678901234567,"a_1":2,"b_x":3,"b_y":4,"b_z":5,"c":[6,7]}`,
	} {
		data := []byte(msg)
		if allocs := testing.AllocsPerRun(100, func() {
			if bad := d.decode(data, vals); bad != nil {
				t.Fatal(bad.reason)
			}
		}); allocs != 0 {
			t.Errorf("%s: %v allocations per message, want 0", msg, allocs)
		}
	}
}

func TestKafkaReadFloatMatchesStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var s jsonScanner
	check := func(tok string) {
		s.reset([]byte(tok))
		got, overflow, bad := s.readFloat()
		want, err := strconv.ParseFloat(tok, 64)
		switch {
		case bad != nil:
			t.Fatalf("%s: %s", tok, bad.reason)
		case overflow != (err != nil):
			t.Fatalf("%s: overflow %t, strconv says %v", tok, overflow, err)
		case math.Float64bits(got) != math.Float64bits(want) || s.pos != len(tok):
			t.Fatalf("%s: %v (read %d bytes), strconv reads %v", tok, got, s.pos, want)
		}
	}
	for _, tok := range []string{"0", "-0", "0.0", "1", "-1", "9007199254740992", "9007199254740993", "1e22", "1e23", "1e-22", "123456789e-22",
		"0.1", "0.30000000000000004", "1234567890123456789", "12345678901234567890", "1.7976931348623157e308", "1.8e308", "4.9e-324", "1e-400",
		"0e999999", "1E+2", "0.000000000000000000000000000001"} {
		check(tok)
	}
	for range 100_000 {
		v := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))
		switch rng.IntN(3) {
		case 0:
			check(strconv.FormatFloat(v, 'g', -1, 64))
		case 1:
			check(strconv.FormatFloat(v, 'e', rng.IntN(20), 64))
		default:
			check(strconv.FormatFloat(v, 'f', rng.IntN(25), 64))
		}
	}
}

// kafkaMessage is the JSON of row id: view a in the flat form for odd
// ids, arrays otherwise; the label is null every seventh row.
func kafkaMessage(id int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id":%d`, id)
	if l := labelOf(id); l != nil {
		fmt.Fprintf(&b, `,"label":%v`, l)
	}
	if id%2 == 1 {
		fmt.Fprintf(&b, `,"a_0":%v,"a_1":%v`, value(id, 0, 0), value(id, 0, 1))
	} else {
		fmt.Fprintf(&b, `,"a":[%v,%v]`, value(id, 0, 0), value(id, 0, 1))
	}
	fmt.Fprintf(&b, `,"b":[%v,%v,%v],"c":[%v,%v]}`, value(id, 1, 0), value(id, 1, 1), value(id, 1, 2), value(id, 2, 0), value(id, 2, 1))
	return b.Bytes()
}

// checkKafkaRows checks the rows of res against kafkaMessage.
func checkKafkaRows(t *testing.T, res readResult, ids []int64) {
	t.Helper()
	if !slices.Equal(res.ids, ids) {
		t.Fatalf("ids %v, want %v", res.ids, ids)
	}
	dims := []int{2, 3, 2}
	for i, id := range res.ids {
		if want := labelOf(int(id)); res.labels[i] != want {
			t.Errorf("id %d: label %v, want %v", id, res.labels[i], want)
		}
		for l, dim := range dims {
			for j := range dim {
				if got, want := res.views[l][i*dim+j], value(int(id), l, j); got != want {
					t.Errorf("id %d: view %d feature %d = %v, want %v", id, l, j, got, want)
				}
			}
		}
	}
}

// kafkaReadN reads batches until n rows and rejects arrived, acking each
// when ack, and returns them with the batches' sizes.
func kafkaReadN(t *testing.T, src *KafkaSource, n int, ack bool) (readResult, []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := readResult{views: make([][]float64, 3)}
	var sizes []int
	for len(res.ids)+len(res.rejects) < n {
		b, err := src.Next(ctx)
		if err != nil {
			t.Fatalf("after %d rows: %v", len(res.ids)+len(res.rejects), err)
		}
		if int(b.Record.NumRows()) != len(b.Rows) {
			t.Errorf("batch has %d rows but %d offsets", b.Record.NumRows(), len(b.Rows))
		}
		if b.Source != src.cfg.Topic {
			t.Errorf("batch source %q, want %q", b.Source, src.cfg.Topic)
		}
		ids, labels := schemas.IDs(b.Record), schemas.Labels(b.Record)
		for i := range int(b.Record.NumRows()) {
			res.ids = append(res.ids, ids.Value(i))
			if labels.IsNull(i) {
				res.labels = append(res.labels, nil)
			} else {
				res.labels = append(res.labels, labels.Value(i))
			}
		}
		for l := range 3 {
			vals, _ := schemas.ViewValues(b.Record, l)
			res.views[l] = append(res.views[l], vals...)
		}
		if len(b.Partitions) != len(b.Rows) {
			t.Errorf("batch has %d offsets but %d partitions", len(b.Rows), len(b.Partitions))
		}
		res.rows = append(res.rows, b.Rows...)
		res.partitions = append(res.partitions, b.Partitions...)
		res.rejects = append(res.rejects, b.Rejects...)
		res.batches++
		sizes = append(sizes, len(b.Rows)+len(b.Rejects))
		b.Record.Release()
		if ack {
			if err := b.Ack(ctx); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
	}
	return res, sizes
}

func newTestKafka(t *testing.T, c *kafkatest.Cluster, topic, group string, mem memory.Allocator, batch int, maxWait time.Duration) *KafkaSource {
	t.Helper()
	src, err := NewKafka(kafkaSpec(t), KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: topic, GroupID: group, MaxWait: maxWait},
		Options{BatchSize: batch, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func TestKafkaSourceReadsRows(t *testing.T) {
	mem := checkedAllocator(t)
	c := kafkatest.Start(t, 3, "rows")
	const n = 60
	var msgs []kafkatest.Message
	for id := range n {
		msgs = append(msgs, kafkatest.Message{Partition: id % 3, Value: kafkaMessage(id)})
	}
	c.Produce(t, "rows", msgs...)

	src := newTestKafka(t, c, "rows", "g", mem, 1000, 100*time.Millisecond)
	res, _ := kafkaReadN(t, src, n, true)
	if len(res.rejects) > 0 {
		t.Fatalf("rejects: %v", res.rejects)
	}
	// Partitions interleave; within one, offsets and ids ascend.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return int(res.ids[i] - res.ids[j]) })
	sorted := readResult{views: make([][]float64, 3)}
	dims := []int{2, 3, 2}
	for _, i := range order {
		sorted.ids = append(sorted.ids, res.ids[i])
		sorted.labels = append(sorted.labels, res.labels[i])
		for l, dim := range dims {
			sorted.views[l] = append(sorted.views[l], res.views[l][i*dim:(i+1)*dim]...)
		}
		// Message id went to partition id%3 at offset id/3.
		if want := res.ids[i] / 3; res.rows[i] != want {
			t.Errorf("id %d: offset %d, want %d", res.ids[i], res.rows[i], want)
		}
		if want := int32(res.ids[i] % 3); res.partitions[i] != want {
			t.Errorf("id %d: partition %d, want %d", res.ids[i], res.partitions[i], want)
		}
	}
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i)
	}
	checkKafkaRows(t, sorted, want)
	if got := c.CommittedOffsets(t, "g", "rows"); !slices.Equal(got, []int64{20, 20, 20}) {
		t.Errorf("committed offsets %v, want [20 20 20]", got)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("Next after Close: %v, want io.EOF", err)
	}
}

func TestKafkaSourceBatches(t *testing.T) {
	c := kafkatest.Start(t, 1, "by-size", "by-time")
	t.Run("BatchSize", func(t *testing.T) {
		for id := range 10 {
			c.ProduceValues(t, "by-size", kafkaMessage(id))
		}
		src := newTestKafka(t, c, "by-size", "g", checkedAllocator(t), 4, 300*time.Millisecond)
		res, sizes := kafkaReadN(t, src, 10, false)
		if !slices.Equal(sizes, []int{4, 4, 2}) {
			t.Errorf("batch sizes %v, want [4 4 2]", sizes)
		}
		checkKafkaRows(t, res, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
		if !slices.Equal(res.rows, res.ids) {
			t.Errorf("offsets %v, want the ids", res.rows)
		}
	})
	t.Run("MaxWait", func(t *testing.T) {
		// Four records on the broker, fetched one at a time (MaxBytes 1:
		// a record batch a fetch); every fetch after the first is held
		// longer than MaxWait. The first record's fetch says three more
		// are there: the batch waits for them, MaxWait at most.
		const maxWait, held = 300 * time.Millisecond, 1800 * time.Millisecond
		for id := range 4 {
			c.ProduceValues(t, "by-time", kafkaMessage(id))
		}
		fake := c.Fake()
		var fetches atomic.Int64
		var first atomic.Pointer[time.Time]
		fake.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
			fake.KeepControl()
			if fetches.Add(1) == 1 {
				now := time.Now()
				first.Store(&now)
			} else {
				fake.SleepControl(func() { time.Sleep(held) })
			}
			return nil, nil, false
		})
		src, err := NewKafka(kafkaSpec(t), KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "by-time", GroupID: "g",
			MaxWait: maxWait, MaxBytes: 1}, Options{BatchSize: 100, Allocator: checkedAllocator(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		res, sizes := kafkaReadN(t, src, 1, false)
		// From the first fetch (joining the group comes before it).
		took := time.Since(*first.Load())
		if !slices.Equal(sizes, []int{1}) {
			t.Errorf("batch sizes %v, want [1]", sizes)
		}
		checkKafkaRows(t, res, []int64{0})
		if took < maxWait || took >= held {
			t.Errorf("batch took %v after the first fetch, want MaxWait %v plus a little", took, maxWait)
		}
	})
}

func TestKafkaSourceRejects(t *testing.T) {
	mem := checkedAllocator(t)
	c := kafkatest.Start(t, 1, "bad")
	// A good message between the bad ones: the source goes on.
	var values [][]byte
	for i, tt := range kafkaBadMessages {
		values = append(values, []byte(tt.msg), kafkaMessage(i))
	}
	c.ProduceValues(t, "bad", values...)
	src := newTestKafka(t, c, "bad", "g", mem, 16, 100*time.Millisecond)
	res, _ := kafkaReadN(t, src, len(values), true)

	var ids []int64
	for i := range kafkaBadMessages {
		ids = append(ids, int64(i))
	}
	checkKafkaRows(t, res, ids)
	if len(res.rejects) != len(kafkaBadMessages) {
		t.Fatalf("%d rejects, want %d", len(res.rejects), len(kafkaBadMessages))
	}
	for i, tt := range kafkaBadMessages {
		r := res.rejects[i]
		if r.Source != "bad/0" || r.Row != int64(2*i) || r.Column != tt.column || !strings.Contains(r.Reason, tt.reason) {
			t.Errorf("%s: reject %+v, want bad/0 row %d column %q reason containing %q", tt.name, r, 2*i, tt.column, tt.reason)
		}
		// An empty message has an empty payload, not none: its dead
		// letter is the message, not a reason record.
		if !bytes.Equal(r.Payload, []byte(tt.msg)) || r.Payload == nil {
			t.Errorf("%s: payload %q (nil: %t), want %q", tt.name, r.Payload, r.Payload == nil, tt.msg)
		}
	}
	for i, row := range res.rows {
		if row != int64(2*i+1) {
			t.Fatalf("record offsets %v, want 1, 3, 5...", res.rows)
		}
	}
}

func TestKafkaSourceAckCommitsAtLeastOnce(t *testing.T) {
	mem := checkedAllocator(t)
	c := kafkatest.Start(t, 1, "acks")
	for id := range 9 {
		c.ProduceValues(t, "acks", kafkaMessage(id))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	next := func(src *KafkaSource) Batch {
		t.Helper()
		b, err := src.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.Record.Release()
		return b
	}

	first := newTestKafka(t, c, "acks", "g", mem, 3, 100*time.Millisecond)
	b1, b2 := next(first), next(first)
	if !slices.Equal(b1.Rows, []int64{0, 1, 2}) || !slices.Equal(b2.Rows, []int64{3, 4, 5}) {
		t.Fatalf("batches %v %v", b1.Rows, b2.Rows)
	}
	// Ack of the first batch after the second was taken; the second is
	// never acked.
	if err := b1.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.CommittedOffsets(t, "g", "acks"); !slices.Equal(got, []int64{3}) {
		t.Errorf("committed %v after the first ack, want [3]", got)
	}
	if err := b1.Ack(ctx); err != nil { // twice is harmless
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b2.Ack(ctx); !errors.Is(err, errSourceClosed) {
		t.Errorf("Ack after Close: %v, want errSourceClosed", err)
	}

	// A restart reads again from the first message not acked.
	second := newTestKafka(t, c, "acks", "g", mem, 3, 100*time.Millisecond)
	b3, b4 := next(second), next(second)
	if !slices.Equal(b3.Rows, []int64{3, 4, 5}) || !slices.Equal(b4.Rows, []int64{6, 7, 8}) {
		t.Fatalf("after restart: batches %v %v, want [3 4 5] [6 7 8]", b3.Rows, b4.Rows)
	}
	// Acks out of order never move the offset back.
	if err := b4.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b3.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.CommittedOffsets(t, "g", "acks"); !slices.Equal(got, []int64{9}) {
		t.Errorf("committed %v, want [9]", got)
	}
	second.Close()

	// Another group reads everything.
	other := newTestKafka(t, c, "acks", "other", mem, 100, 100*time.Millisecond)
	if b := next(other); len(b.Rows) != 9 {
		t.Errorf("other group got offsets %v, want 0..8", b.Rows)
	}
}

// An offset commit whose connection drops is tried again (one such drop
// used to stop the service); one that keeps failing fails the Ack once
// the retry policy gives up.
func TestKafkaSourceAckRidesOutHiccup(t *testing.T) {
	for _, tt := range []struct {
		name   string
		hiccup time.Duration
		retry  kafkaconn.Retry
		want   int64 // the offset committed; -1 for none
	}{
		{"one second", time.Second, kafkaconn.Retry{}, 3},
		{"for good", time.Hour, kafkaconn.Retry{MaxElapsed: time.Second, MaxBackoff: 200 * time.Millisecond}, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := checkedAllocator(t)
			c := kafkatest.Start(t, 1, "acks")
			for id := range 3 {
				c.ProduceValues(t, "acks", kafkaMessage(id))
			}
			src, err := NewKafka(kafkaSpec(t), KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers, Retry: tt.retry}, Topic: "acks", GroupID: "g",
				MaxWait: 100 * time.Millisecond}, Options{BatchSize: 3, Allocator: mem})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := src.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b.Record.Release()
			end := time.Now().Add(tt.hiccup)
			c.Drop(kmsg.OffsetCommit, func() bool { return time.Now().Before(end) })
			err = b.Ack(ctx)
			if tt.want < 0 {
				if !errors.Is(err, kafkaconn.ErrGaveUp) {
					t.Errorf("Ack while commits fail for good: %v, want it to give up", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Ack during a %v hiccup: %v", tt.hiccup, err)
			}
			if got := c.CommittedOffsets(t, "g", "acks"); !slices.Equal(got, []int64{tt.want}) {
				t.Errorf("committed %v, want [%d]", got, tt.want)
			}
		})
	}
}

func TestKafkaSourceStartOffsetLast(t *testing.T) {
	c := kafkatest.Start(t, 1, "late")
	c.ProduceValues(t, "late", kafkaMessage(0), kafkaMessage(1))
	src, err := NewKafka(kafkaSpec(t), KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "late", GroupID: "g",
		MaxWait: 50 * time.Millisecond, StartOffset: kafkaconn.LastOffset}, Options{Allocator: checkedAllocator(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// Join the group first, then produce: only the new message arrives.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err = src.Next(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on no new message: %v", err)
	}
	c.ProduceValues(t, "late", kafkaMessage(2))
	res, _ := kafkaReadN(t, src, 1, false)
	checkKafkaRows(t, res, []int64{2})
}

func TestKafkaSourceCancelLeavesNoGoroutine(t *testing.T) {
	c := kafkatest.Start(t, 1, "quiet")
	before := runtime.NumGoroutine()

	src, err := NewKafka(kafkaSpec(t), KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "quiet", GroupID: "g"},
		Options{Allocator: checkedAllocator(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err = src.Next(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Next: %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Next returned %v after it was cancelled", took-300*time.Millisecond)
	}
	if during := runtime.NumGoroutine(); during <= before {
		t.Errorf("%d goroutines with a reader running, %d before: the count shows nothing", during, before)
	}
	start = time.Now()
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v", took)
	}
	expectGoroutinesBack(t, before)
}

func TestNewKafkaChecksConfig(t *testing.T) {
	good := KafkaConfig{Conn: kafkaconn.Config{Brokers: []string{"127.0.0.1:1"}}, Topic: "t", GroupID: "g"}
	tests := []struct {
		name string
		edit func(*KafkaConfig, *Options)
		want string
	}{
		{"no brokers", func(c *KafkaConfig, _ *Options) { c.Conn.Brokers = nil }, "no brokers"},
		{"no topic", func(c *KafkaConfig, _ *Options) { c.Topic = "" }, "no topic"},
		{"no group", func(c *KafkaConfig, _ *Options) { c.GroupID = "" }, "no consumer group"},
		{"negative wait", func(c *KafkaConfig, _ *Options) { c.MaxWait = -time.Second }, "MaxWait"},
		{"negative bytes", func(c *KafkaConfig, _ *Options) { c.MinBytes = -1 }, "must not be negative"},
		{"min over max", func(c *KafkaConfig, _ *Options) { c.MinBytes, c.MaxBytes = 10, 5 }, "exceeds MaxBytes"},
		{"odd start", func(c *KafkaConfig, _ *Options) { c.StartOffset = 42 }, "StartOffset 42"},
		{"odd format", func(c *KafkaConfig, _ *Options) { c.Format = 7 }, "Format Format(7): want FormatByHeader"},
		{"labels in the input topic", func(c *KafkaConfig, _ *Options) { c.LabelsTopic = "t" }, `the labels topic is the input topic "t"`},
		{"negative session", func(c *KafkaConfig, _ *Options) { c.SessionTimeout = -time.Second }, "must not be negative"},
		{"negative rebalance", func(c *KafkaConfig, _ *Options) { c.RebalanceTimeout = -time.Second }, "must not be negative"},
		{"negative join backoff", func(c *KafkaConfig, _ *Options) { c.JoinGroupBackoff = -time.Second }, "JoinGroupBackoff -1s must not be negative"},
		{"heartbeat as long as the session", func(c *KafkaConfig, _ *Options) {
			c.HeartbeatInterval, c.SessionTimeout = 10*time.Second, 10*time.Second
		},
			"HeartbeatInterval 10s must be shorter than SessionTimeout 10s"},
		{"heartbeat past the default session", func(c *KafkaConfig, _ *Options) { c.HeartbeatInterval = time.Minute }, "shorter than SessionTimeout 30s"},
		{"negative batch", func(_ *KafkaConfig, o *Options) { o.BatchSize = -1 }, "batch size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, opts := good, Options{}
			tt.edit(&cfg, &opts)
			src, err := NewKafka(kafkaSpec(t), cfg, opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				if src != nil {
					src.Close()
				}
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := NewKafka(nil, good, Options{}); err == nil {
		t.Error("nil spec accepted")
	}
	src, err := NewKafka(kafkaSpec(t), good, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if src.cfg.MaxWait != DefaultKafkaMaxWait || src.cfg.MinBytes != 1 || src.cfg.MaxBytes != 10<<20 || src.cfg.StartOffset != kafkaconn.FirstOffset ||
		src.cfg.HeartbeatInterval != 3*time.Second || src.cfg.SessionTimeout != 30*time.Second || src.cfg.RebalanceTimeout != 30*time.Second {
		t.Errorf("defaults %+v", src.cfg)
	}
	if src.cfg.JoinGroupBackoff != DefaultKafkaJoinGroupBackoff {
		t.Errorf("JoinGroupBackoff %v by default, want %v", src.cfg.JoinGroupBackoff, DefaultKafkaJoinGroupBackoff)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// benchKafkaMessages are messages of 3 views × 64 random floats in the
// shortest form that round-trips, as JSON encoders write them: of a
// float64 (mostly 16 or 17 digits) or, with bits 32, of a float32 (at most
// 9 digits).
func benchKafkaMessages(n int, flat bool, bits int) ([][]byte, *schemas.ViewSpec) {
	spec := &schemas.ViewSpec{Task: schemas.Classification, ID: "id", Label: "label"}
	for l := range benchViews {
		name := string(rune('a' + l))
		spec.Views = append(spec.Views, schemas.View{Name: name, Prefix: name + "_", Dim: benchDim})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := make([][]byte, n)
	for i := range msgs {
		b := fmt.Appendf(nil, `{"id":%d,"label":%d`, i, i%3)
		for l, v := range spec.Views {
			if flat {
				for j := range benchDim {
					b = fmt.Appendf(b, `,"%s%d":`, v.Prefix, j)
					b = strconv.AppendFloat(b, rng.NormFloat64(), 'g', -1, bits)
				}
				continue
			}
			b = fmt.Appendf(b, `,"%s":[`, spec.Views[l].Name)
			for j := range benchDim {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, rng.NormFloat64(), 'g', -1, bits)
			}
			b = append(b, ']')
		}
		msgs[i] = append(b, '}')
	}
	return msgs, spec
}

// BenchmarkKafkaDecode decodes batches of 1024 messages into canonical
// records, as KafkaSource.Next does after fetching them.
func BenchmarkKafkaDecode(b *testing.B) {
	for _, bench := range []struct {
		name string
		flat bool
		bits int
	}{{"arrays", false, 64}, {"flat", true, 64}, {"arrays-float32", false, 32}} {
		b.Run(bench.name, func(b *testing.B) {
			values, spec := benchKafkaMessages(1024, bench.flat, bench.bits)
			msgs := make([]kafkaconn.Message, len(values))
			size := 0
			for i, v := range values {
				msgs[i] = kafkaconn.Message{Topic: "t", Offset: int64(i), Value: v}
				size += len(v)
			}
			// The records are allocated as a KafkaSource allocates them.
			recycled := arrowalloc.New(memory.NewGoAllocator(), arrowalloc.Options{})
			dec, rb := newRecordDecoder(spec, FormatJSON, false, memory.NewGoAllocator()), schemas.NewRecordBuilder(recycled, spec)
			defer recycled.Close()
			defer rb.Release()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				batch := decodeKafkaBatch(dec, rb, "t", msgs)
				nextOffsets(msgs) // what the batch's Ack commits
				if len(batch.Rejects) > 0 {
					b.Fatal(batch.Rejects[0].Reason)
				}
				batch.Record.Release()
			}
			b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// expectGoroutinesBack waits up to 3 s for the number of goroutines to fall
// back to before (a closed reader's goroutines end at once, the in-process
// broker's when it sees the connections close) and reports the stacks if it
// does not.
func expectGoroutinesBack(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after Close:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

// Readiness follows the reader: joining, consuming, an error since, and
// consuming again once activity shows without an error.
func TestKafkaHealth(t *testing.T) {
	h := &kafkaHealth{group: "g"}
	now := time.Now()
	steps := []struct {
		failure string // reported before the step, "" for none
		stats   kafkaconn.ReaderStats
		want    string // "" for ready
	}{
		{"", kafkaconn.ReaderStats{}, "joining consumer group g"},
		{"", kafkaconn.ReaderStats{Rebalances: 1, Fetches: 2}, ""},
		{"", kafkaconn.ReaderStats{}, ""}, // idle, no partition to fetch: still a member
		{"dial tcp: connection refused", kafkaconn.ReaderStats{Fetches: 1, Errors: 2}, "not consuming since"},
		{"", kafkaconn.ReaderStats{}, "connection refused"},
		{"", kafkaconn.ReaderStats{Rebalances: 1, Fetches: 3}, ""},
	}
	for i, s := range steps {
		now = now.Add(time.Second)
		if s.failure != "" {
			h.failed(now.Add(-time.Millisecond), s.failure)
		}
		err := h.ready(s.stats, now)
		if s.want == "" && err != nil || s.want != "" && (err == nil || !strings.Contains(err.Error(), s.want)) {
			t.Errorf("step %d: %v, want %q", i, err, s.want)
		}
	}
}

// A source reports readiness from the reader itself: ready once it
// consumes, not ready once the broker is gone, while Next keeps waiting
// instead of failing.
func TestKafkaSourceReady(t *testing.T) {
	mem := checkedAllocator(t)
	c := kafkatest.Start(t, 1, "rows")
	c.ProduceValues(t, "rows", kafkaMessage(1), kafkaMessage(2))
	src := newTestKafka(t, c, "rows", "g", mem, 10, 20*time.Millisecond)
	kafkaReadN(t, src, 2, true)
	waitReady := func(what string, ok func(error) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for err := src.Ready(); !ok(err); err = src.Ready() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: Ready says %v", what, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitReady("consuming", func(err error) bool { return err == nil })
	ctx, cancel := context.WithCancel(context.Background())
	next := make(chan error, 1)
	go func() {
		b, err := src.Next(ctx)
		if err == nil {
			b.Record.Release()
		}
		next <- err
	}()
	c.Fake().Close()
	waitReady("the broker gone", func(err error) bool { return err != nil && strings.Contains(err.Error(), "not consuming since") })
	select {
	case err := <-next:
		t.Errorf("Next returned %v with the broker gone, want it to wait", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if err := <-next; !errors.Is(err, context.Canceled) {
		t.Errorf("Next after cancel: %v", err)
	}
}

// A batch carries its records' timestamps, and PartitionStats adds up
// what every partition's reader fetched, the partitions owned while the
// member reads them and released when it stops.
func TestKafkaSourcePartitionStats(t *testing.T) {
	c := kafkatest.Start(t, 2, "rows")
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	const n = 20
	var msgs []kafkatest.Message
	var bytes int64
	for id := range n {
		msgs = append(msgs, kafkatest.Message{Partition: id % 2, Value: kafkaMessage(id), Time: base.Add(time.Duration(id) * time.Second)})
		bytes += int64(len(kafkaMessage(id)))
	}
	c.Produce(t, "rows", msgs...)
	src := newTestKafka(t, c, "rows", "g", checkedAllocator(t), 1000, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for seen := 0; seen < n; {
		b, err := src.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids := schemas.IDs(b.Record)
		if len(b.Times) != len(b.Rows) {
			t.Fatalf("batch of %d rows has %d times", len(b.Rows), len(b.Times))
		}
		for i, at := range b.Times {
			if want := base.Add(time.Duration(ids.Value(i)) * time.Second); !at.Equal(want) {
				t.Errorf("id %d: time %v, want %v", ids.Value(i), at, want)
			}
		}
		seen += len(b.Rows)
		b.Record.Release()
		if err := b.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check := func(owned bool) {
		t.Helper()
		st := src.PartitionStats()
		if len(st) != 2 {
			t.Fatalf("stats of %d partitions, want 2: %+v", len(st), st)
		}
		var gotMsgs, gotBytes int64
		for p, ps := range st {
			// Errors are not checked: a fetch may time out on a busy machine.
			if ps.Topic != "rows" || ps.Partition != p || ps.Owned != owned || ps.Lag != 0 || ps.Fetches == 0 {
				t.Errorf("partition %d: %+v, want owned %t and no lag", p, ps, owned)
			}
			gotMsgs += ps.Messages
			gotBytes += ps.Bytes
		}
		if gotMsgs != n || gotBytes != bytes {
			t.Errorf("fetched %d messages of %d bytes, want %d of %d", gotMsgs, gotBytes, n, bytes)
		}
	}
	check(true)
	// Counters add up: read twice, they do not start again.
	check(true)
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	check(false)
}

// The lag is what is left after the messages taken: positive while the
// member is behind, and 0, not an older reading, once it has caught up.
func TestKafkaSourceLag(t *testing.T) {
	const n = 200
	c := kafkatest.Start(t, 1, "lagging")
	msgs := make([]kafkatest.Message, n)
	for i := range msgs {
		msgs[i] = kafkatest.Message{Value: kafkaMessage(i)}
	}
	c.Produce(t, "lagging", msgs...)
	src := newTestKafka(t, c, "lagging", "g", checkedAllocator(t), 10, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lag := func() int64 {
		t.Helper()
		st := src.PartitionStats()
		if len(st) != 1 {
			t.Fatalf("stats of %d partitions, want 1: %+v", len(st), st)
		}
		return st[0].Lag
	}
	for seen := 0; seen < n; {
		b, err := src.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen += len(b.Rows)
		b.Record.Release()
		if err := b.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		// The source takes at most a batch in hand, one queued and the one
		// its partition reader waits to queue ahead of what was read.
		if l := lag(); l > int64(n-seen) || seen < n-30 && l <= 0 {
			t.Errorf("lag %d after %d of %d messages", l, seen, n)
		}
	}
	if l := lag(); l != 0 {
		t.Errorf("lag %d after every message was taken", l)
	}
}
