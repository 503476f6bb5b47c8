package deploy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The metrics dump runs inside each operator's module (a go build overlay
// adds it there), the only place that may import the operator's internal
// controller package: it registers the operator's metrics, and the dump
// describes every collector of controller-runtime's registry. GaugeVecs have
// no samples until a label set exists, so describing (not gathering) is what
// shows a metric is registered.
const dumpMain = `package main

import (
	"encoding/json"
	"os"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	_ "cairn.dev/operators/OPERATOR/internal/controller"
)

var exported []string

func main() {
	fqName := regexp.MustCompile(` + "`" + `fqName: "([^"]+)"` + "`" + `)
	ch := make(chan *prometheus.Desc, 1024)
	go func() { metrics.Registry.(prometheus.Collector).Describe(ch); close(ch) }()
	registered := []string{}
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			registered = append(registered, m[1])
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string][]string{"registered": registered, "exported": exported}); err != nil {
		panic(err)
	}
}
`

// dumpNames is added when the controller package lists its MetricNames.
const dumpNames = `package main

import "cairn.dev/operators/OPERATOR/internal/controller"

func init() { exported = controller.MetricNames }
`

type metricsDump struct {
	Registered []string `json:"registered"`
	Exported   []string `json:"exported"`
}

// operatorMetrics builds and runs the dump in operators/<op> and returns
// what it printed.
func operatorMetrics(t *testing.T, op string) metricsDump {
	t.Helper()
	modDir := filepath.Join(root(t), "operators", op)
	ctrlDir := filepath.Join(modDir, "internal", "controller")
	src, err := filepath.Glob(filepath.Join(ctrlDir, "*.go"))
	if err != nil || len(src) == 0 {
		t.Fatalf("%s: no controller package in %s", op, ctrlDir)
	}
	hasNames := false
	for _, f := range src {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		hasNames = hasNames || (!strings.HasSuffix(f, "_test.go") && bytes.Contains(data, []byte("\nvar MetricNames = ")))
	}
	tmp := t.TempDir()
	files := map[string]string{"main.go": dumpMain}
	if hasNames {
		files["names.go"] = dumpNames
	}
	replace := map[string]string{}
	pkgDir := filepath.Join(ctrlDir, "zz_cairn_metricsdump")
	for name, body := range files {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(body, "OPERATOR", op)), 0o644); err != nil {
			t.Fatal(err)
		}
		replace[filepath.Join(pkgDir, name)] = p
	}
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "-overlay", overlayFile, "./internal/controller/zz_cairn_metricsdump")
	cmd.Dir = modDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: running the metrics dump: %v\n%s", op, err, stderr.String())
	}
	var d metricsDump
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("%s: metrics dump %q: %v", op, out, err)
	}
	if hasNames && len(d.Exported) == 0 {
		t.Fatalf("%s: MetricNames is empty", op)
	}
	return d
}

// metricRef finds metric names in PromQL: every Cairn metric, and
// controller-runtime's and client-go's workqueue metrics.
var metricRef = regexp.MustCompile(`\b(?:cairn|controller_runtime|workqueue)_[a-zA-Z0-9_]+\b`)

// TestMonitoring: the monitoring component's PrometheusRule and
// ServiceMonitor parse as prometheus-operator objects, the ServiceMonitor
// selects every operator's metrics Service on its port, and every metric an
// alert references is registered by an operator; the backup operator's
// MetricNames are each registered and each alerted on.
func TestMonitoring(t *testing.T) {
	objs := build(t, overlay(t, []string{"platform"}, []string{"platform/components/monitoring"}))

	var rule monitoringv1.PrometheusRule
	into(t, find(t, objs, "PrometheusRule", "cairn-operators"), &rule)
	var sm monitoringv1.ServiceMonitor
	into(t, find(t, objs, "ServiceMonitor", "cairn-operators"), &sm)

	registered := map[string]bool{}
	var exported []string
	for _, op := range operators {
		d := operatorMetrics(t, op)
		for _, n := range d.Registered {
			registered[n] = true
		}
		for _, n := range d.Exported {
			if !slices.Contains(d.Registered, n) {
				t.Errorf("%s: MetricNames lists %s, which is not registered", op, n)
			}
		}
		exported = append(exported, d.Exported...)
	}
	if len(exported) == 0 {
		t.Fatal("no operator exports its own metrics")
	}

	referenced := map[string]bool{}
	alerts := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %s: needs a severity label and a summary", r.Alert)
			}
			refs := metricRef.FindAllString(r.Expr.String(), -1)
			if len(refs) == 0 {
				t.Errorf("alert %s references no Cairn or controller-runtime metric: %s", r.Alert, r.Expr.String())
			}
			for _, m := range refs {
				base := m
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(m, suffix); ok && registered[b] {
						base = b
					}
				}
				if !registered[base] {
					t.Errorf("alert %s references %s, which no operator registers", r.Alert, m)
				}
				referenced[base] = true
			}
		}
	}
	for _, want := range []string{"CairnBackupJobFailing", "CairnBackupJobNoRecentSuccess"} {
		if !slices.ContainsFunc(rule.Spec.Groups, func(g monitoringv1.RuleGroup) bool {
			return slices.ContainsFunc(g.Rules, func(r monitoringv1.Rule) bool { return r.Alert == want })
		}) {
			t.Errorf("no alert %s", want)
		}
	}
	for _, n := range exported {
		if !referenced[n] {
			t.Errorf("exported metric %s is in no alert", n)
		}
	}

	// The ServiceMonitor scrapes every operator's metrics Service.
	sel, err := labelsSelector(sm)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range operators {
		var svc corev1.Service
		into(t, find(t, objs, "Service", "cairn-"+op+"-metrics-service"), &svc)
		if !sel.Matches(labels.Set(svc.Labels)) {
			t.Errorf("the ServiceMonitor does not select %s (labels %v)", svc.Name, svc.Labels)
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == sm.Spec.Endpoints[0].Port }) {
			t.Errorf("%s has no port %q", svc.Name, sm.Spec.Endpoints[0].Port)
		}
		if !slices.Contains(sm.Spec.NamespaceSelector.MatchNames, svc.Namespace) {
			t.Errorf("the ServiceMonitor does not look in namespace %s", svc.Namespace)
		}
	}
}

func labelsSelector(sm monitoringv1.ServiceMonitor) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
}
