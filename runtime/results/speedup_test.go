package results

import (
	"encoding/json"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestSpeedupReadsAndWritesOneWay(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Speedup
		err  bool
	}{
		{"max", 0, false}, {"100", 100, false}, {"2.5", 2.5, false},
		{"0", 0, true}, {"-1", 0, true}, {"+Inf", 0, true}, {"NaN", 0, true}, {"fast", 0, true},
	} {
		var flag Speedup
		err := flag.Set(tc.in)
		var doc struct {
			S Speedup `yaml:"speedup"`
		}
		yerr := yaml.Unmarshal([]byte("\n\nspeedup: "+tc.in+"\n"), &doc)
		if (err != nil) != tc.err || (yerr != nil) != tc.err {
			t.Errorf("%q: flag error %v, yaml error %v; want error %v", tc.in, err, yerr, tc.err)
			continue
		}
		if tc.err {
			if !strings.Contains(yerr.Error(), "line 3") {
				t.Errorf("%q: yaml error %q does not name line 3", tc.in, yerr)
			}
			continue
		}
		if flag != tc.want || doc.S != tc.want {
			t.Errorf("%q: flag %v, yaml %v; want %v", tc.in, flag, doc.S, tc.want)
		}
		if got, _ := ParseSpeedup(flag.String()); got != flag {
			t.Errorf("%q: String %q does not read back", tc.in, flag.String())
		}
	}
	b, _ := json.Marshal(Meta{Speedup: 0})
	if !strings.Contains(string(b), `"speedup":0`) {
		t.Errorf("summary writes max as %s, want the number 0", b)
	}
}
