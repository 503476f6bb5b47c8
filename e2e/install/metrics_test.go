package install

import (
	"math"
	"strings"
	"testing"
)

func TestParseMetrics(t *testing.T) {
	in := `# HELP cairn_protectionplan_rpo_seconds The plan's recovery point objective.
# TYPE cairn_protectionplan_rpo_seconds gauge
cairn_protectionplan_rpo_seconds{name="shop",namespace="data-x1"} 120
cairn_protectionplan_verifications_total{name="shop",namespace="data-x1",result="Failed"} 1
weird{a="x\"y\\z",b="1,2}"} +Inf
plain 1.5e+09 1700000000000
`
	got, err := ParseMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("got %d samples, want 4: %+v", len(got), got)
	}
	if v, ok := Find(got, "cairn_protectionplan_rpo_seconds", map[string]string{"namespace": "data-x1", "name": "shop"}); !ok || v != 120 {
		t.Errorf("rpo: %v %v", v, ok)
	}
	if v, ok := Find(got, "cairn_protectionplan_verifications_total", map[string]string{"result": "Failed"}); !ok || v != 1 {
		t.Errorf("verifications: %v %v", v, ok)
	}
	if _, ok := Find(got, "cairn_protectionplan_rpo_seconds", map[string]string{"name": "other"}); ok {
		t.Error("found a series of another plan")
	}
	w := got[2]
	if w.Labels["a"] != `x"y\z` || w.Labels["b"] != "1,2}" || !math.IsInf(w.Value, 1) {
		t.Errorf("escapes: %+v", w)
	}
	if got[3].Name != "plain" || got[3].Value != 1.5e9 {
		t.Errorf("plain: %+v", got[3])
	}
	if _, err := ParseMetrics(strings.NewReader(`bad{a="x} 1`)); err == nil {
		t.Error("an unterminated label value was accepted")
	}
}
