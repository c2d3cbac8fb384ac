package ingest

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// FuzzKafkaDecode checks the message decoder on arbitrary input: it never
// panics; it either yields a row or rejects with a reason; it accepts only
// valid JSON, in which no field it reads is given twice, and what it
// accepts encoding/json reads the same; it rejects a field as given twice
// only when it is.
func FuzzKafkaDecode(f *testing.F) {
	f.Add([]byte(`{"id":1,"label":2.5,"a":[1,2],"b":[3,4,5],"c":[6,7]}`))
	f.Add([]byte(`{"b_z":5,"a_1":2,"id":-7,"b_x":3,"a_0":1,"b_y":4,"c":[6,7],"label":null}`))
	f.Add([]byte(`{"\u0069d":4,"\u0061":[1e2,-0.5E-1],"b_\u0078":3,"b_y":4,"b_z":5,"c":[6,7],"x":{"y":[true,false,null,"s\n"]}}`))
	f.Add(kafkaMessage(3))
	for _, tt := range kafkaBadMessages {
		f.Add([]byte(tt.msg))
	}
	f.Add([]byte(`{"id":1,"a_0":1,"a_1":2,"\u0061_0":3,"b":[1,2,3],"c":[1,2]}`))
	spec := kafkaSpec(f)
	read := map[string]bool{spec.ID: true, spec.Label: true}
	for _, v := range spec.Views {
		read[v.Name] = true
		for _, c := range v.ColumnNames() {
			read[c] = true
		}
	}
	d := newKafkaDecoder(spec, false)
	vals := viewScratch(spec)
	f.Fuzz(func(t *testing.T, data []byte) {
		bad := d.decode(data, vals)
		if bad != nil {
			if bad.reason == "" {
				t.Fatalf("reject without a reason, column %q", bad.column)
			}
			if strings.HasSuffix(bad.reason, "is given twice") && json.Valid(data) && topLevelKeys(data)[bad.column] < 2 {
				t.Fatalf("%q: %s, but it is not", data, bad.reason)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		for key, n := range topLevelKeys(data) {
			if n > 1 && read[key] {
				t.Fatalf("accepted %q, which gives %q %d times", data, key, n)
			}
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(data, &fields); err != nil {
			t.Fatalf("accepted %q, which encoding/json rejects: %v", data, err)
		}
		var id int64
		if err := json.Unmarshal(fields["id"], &id); err != nil || id != d.id {
			t.Fatalf("id %d, encoding/json reads %s (%v)", d.id, fields["id"], err)
		}
		for l, v := range spec.Views {
			raw, ok := fields[v.Name]
			if !ok {
				continue // flat form
			}
			var want []float64
			if err := json.Unmarshal(raw, &want); err != nil || len(want) != len(d.vals[l]) {
				t.Fatalf("view %s: %v, encoding/json reads %s (%v)", v.Name, d.vals[l], raw, err)
			}
			for j := range want {
				if got := d.vals[l][j]; got != want[j] && !(math.IsNaN(got) && math.IsNaN(want[j])) {
					t.Fatalf("view %s item %d: %v, encoding/json reads %v", v.Name, j, got, want[j])
				}
			}
		}
	})
}

// topLevelKeys counts the keys of a JSON object, as encoding/json decodes
// them, escapes resolved.
func topLevelKeys(data []byte) map[string]int {
	keys := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return keys
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys
		}
		keys[tok.(string)]++
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
	}
	return keys
}

// FuzzLabelDecode checks the decoder of label messages on arbitrary input:
// it never panics; it rejects with a reason, or accepts only valid JSON
// objects that give the id and the label once each, reading them as
// encoding/json does (a null label as Null).
func FuzzLabelDecode(f *testing.F) {
	for _, msg := range []string{`{"id":1,"label":2.5}`, `{"label":null,"id":-3,"x":[1,{"y":"z"}]}`, `{"id":1}`, `{"id":1,"label":1,"label":2}`,
		`{"\u0069d":4,"label":1e2}`, `[1]`, ``, `{"id":1.5,"label":1}`} {
		f.Add([]byte(msg))
	}
	d := newLabelDecoder(kafkaSpec(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		if bad := decodeLabel(d, data); bad != nil {
			if bad.reason == "" {
				t.Fatalf("reject without a reason, column %q", bad.column)
			}
			return
		}
		var fields map[string]json.RawMessage
		if !json.Valid(data) || json.Unmarshal(data, &fields) != nil {
			t.Fatalf("accepted %q, which is not a JSON object", data)
		}
		keys := topLevelKeys(data)
		if keys["id"] != 1 || keys["label"] != 1 {
			t.Fatalf("accepted %q, which gives id %d and label %d times", data, keys["id"], keys["label"])
		}
		var id int64
		if err := json.Unmarshal(fields["id"], &id); err != nil || id != d.id {
			t.Fatalf("id %d, encoding/json reads %s (%v)", d.id, fields["id"], err)
		}
		var label *float64
		if err := json.Unmarshal(fields["label"], &label); err != nil || (label == nil) != !d.hasLabel || label != nil && *label != d.label {
			t.Fatalf("label %v (known %t), encoding/json reads %s (%v)", d.label, d.hasLabel, fields["label"], err)
		}
	})
}
