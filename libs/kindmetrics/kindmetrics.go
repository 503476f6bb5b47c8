// Package kindmetrics is how a Cairn operator declares the metrics of its
// kind: each is registered with controller-runtime's registry (served on
// the manager's /metrics) as it is declared, its name is listed for the
// monitoring component's tests (alerts must reference real metrics), and
// Forget drops every series of an object that is gone — one place, so no
// series is forgotten when a metric is added.
package kindmetrics

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// vec is what every metric vector can do.
type vec interface {
	prometheus.Collector
	DeletePartialMatch(prometheus.Labels) int
}

// Set is one kind's metrics.
type Set struct {
	reg   prometheus.Registerer
	vecs  []vec
	names []string
}

// New is an empty Set registering with controller-runtime's registry.
func New() *Set { return &Set{reg: crmetrics.Registry} }

func (s *Set) add(name string, v vec) {
	s.reg.MustRegister(v)
	s.vecs = append(s.vecs, v)
	s.names = append(s.names, name)
}

// Gauge declares a gauge vector.
func (s *Set) Gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	s.add(name, v)
	return v
}

// ObjectGauge declares a gauge vector per object (labels namespace and
// name: Forget drops an object's series).
func (s *Set) ObjectGauge(name, help string) *prometheus.GaugeVec {
	return s.Gauge(name, help, "namespace", "name")
}

// Counter declares a counter vector.
func (s *Set) Counter(name, help string, labels ...string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	s.add(name, v)
	return v
}

// Histogram declares a histogram vector.
func (s *Set) Histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	s.add(name, v)
	return v
}

// Names lists the metrics declared, in order.
func (s *Set) Names() []string { return append([]string(nil), s.names...) }

// Forget drops every series labelled with namespace and name (metrics
// without a name label keep theirs: they are not per object).
func (s *Set) Forget(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "name": name}
	for _, v := range s.vecs {
		v.DeletePartialMatch(l)
	}
}

// Finished is what every one-off kind (RestoreJob, MigrationJob) exports
// about its objects that ended: cairn_<kind>_finished_total and
// cairn_<kind>_duration_seconds, by namespace and result. One-off objects
// are not labelled by name (that would grow without bound).
type Finished struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// Finished declares kind's (lowercase, e.g. "restorejob") finished metrics;
// durationHelp says from when to when a duration counts.
func (s *Set) Finished(kind, plural, durationHelp string, buckets []float64) *Finished {
	return &Finished{
		total: s.Counter("cairn_"+kind+"_finished_total",
			"Finished "+plural+" by namespace and result (Succeeded, Failed).", "namespace", "result"),
		duration: s.Histogram("cairn_"+kind+"_duration_seconds", durationHelp, buckets, "namespace", "result"),
	}
}

// Record counts an object of namespace that just ended with result, and
// its duration from start to end when both are known.
func (f *Finished) Record(namespace, result string, start, end *metav1.Time) {
	f.total.WithLabelValues(namespace, result).Inc()
	if start != nil && end != nil {
		f.duration.WithLabelValues(namespace, result).Observe(max(end.Sub(start.Time), 0).Seconds())
	}
}
