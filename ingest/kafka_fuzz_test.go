package ingest

import (
	"encoding/json"
	"math"
	"testing"
)

// FuzzKafkaDecode checks the message decoder on arbitrary input: it never
// panics; it either yields a row or rejects with a reason; it accepts only
// valid JSON, and what it accepts encoding/json reads the same.
func FuzzKafkaDecode(f *testing.F) {
	f.Add([]byte(`{"id":1,"label":2.5,"a":[1,2],"b":[3,4,5],"c":[6,7]}`))
	f.Add([]byte(`{"b_z":5,"a_1":2,"id":-7,"b_x":3,"a_0":1,"b_y":4,"c":[6,7],"label":null}`))
	f.Add([]byte(`{"\u0069d":4,"\u0061":[1e2,-0.5E-1],"b_\u0078":3,"b_y":4,"b_z":5,"c":[6,7],"x":{"y":[true,false,null,"s\n"]}}`))
	f.Add(kafkaMessage(3))
	for _, tt := range kafkaBadMessages {
		f.Add([]byte(tt.msg))
	}
	spec := kafkaSpec(f)
	d := newKafkaDecoder(spec, false)
	f.Fuzz(func(t *testing.T, data []byte) {
		bad := d.decode(data)
		if bad != nil {
			if bad.reason == "" {
				t.Fatalf("reject without a reason, column %q", bad.column)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
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
