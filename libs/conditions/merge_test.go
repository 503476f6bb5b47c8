package conditions_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/internal/testtype"
)

func cond(typ string, status metav1.ConditionStatus, reason, msg string) *metav1.Condition {
	return &metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}

const (
	T = metav1.ConditionTrue
	F = metav1.ConditionFalse
	U = metav1.ConditionUnknown
)

func TestMerge(t *testing.T) {
	ready := func(name string, status metav1.ConditionStatus, reason, msg string) conditions.Source {
		return conditions.Source{Name: name, Type: "Ready", Condition: cond("Ready", status, reason, msg)}
	}
	missing := func(name string) conditions.Source { return conditions.Source{Name: name, Type: "Ready"} }
	cases := []struct {
		name    string
		sources []conditions.Source
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"nothing", nil, U, conditions.NotYetReportedReason, "nothing to summarise yet"},
		{"all true", []conditions.Source{ready("a", T, "Succeeded", "ok"), ready("b", T, "Fine", "")},
			T, "Succeeded", "a: ok"},
		{"one false among trues", []conditions.Source{ready("a", T, "Succeeded", "ok"), ready("b", F, "BackupFailed", "disk full")},
			F, "BackupFailed", "b: disk full"},
		{"errors before unknowns, whatever the order", []conditions.Source{
			missing("a"), ready("b", U, "Checking", "probing"), ready("c", F, "Broken", "bad"), ready("d", T, "Succeeded", "ok")},
			F, "Broken", "c: bad; a: Ready not yet reported; b: probing"},
		{"unknown when none false", []conditions.Source{ready("a", T, "Succeeded", "ok"), missing("b")},
			U, conditions.NotYetReportedReason, "b: Ready not yet reported"},
		{"first issue's reason", []conditions.Source{ready("a", F, "First", "1"), ready("b", F, "Second", "2")},
			F, "First", "a: 1; b: 2"},
		{"at most three named", []conditions.Source{ready("a", F, "X", "1"), ready("b", F, "X", "2"), ready("c", F, "X", "3"), ready("d", F, "X", "4"), ready("e", F, "X", "5")},
			F, "X", "a: 1; b: 2; c: 3; and 2 more"},
		{"negative polarity: Stalled=True is an issue", []conditions.Source{
			ready("a", T, "Succeeded", "ok"),
			{Name: "Stalled", Type: "Stalled", Condition: cond("Stalled", T, "InvalidSpec", "bad cron"), NegativePolarity: true}},
			F, "InvalidSpec", "Stalled: bad cron"},
		{"negative polarity: Stalled=False is fine", []conditions.Source{
			{Name: "Stalled", Type: "Stalled", Condition: cond("Stalled", F, "Fine", ""), NegativePolarity: true}},
			T, "Fine", ""},
		{"no reason, no message", []conditions.Source{ready("a", F, "", "")},
			F, conditions.NoReasonReason, "a: " + conditions.NoReasonReason},
		{"no name: no prefix", []conditions.Source{{Type: "Ready", Condition: cond("Ready", F, "X", "bad")}},
			F, "X", "bad"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := conditions.Merge("Healthy", c.sources)
			if got.Type != "Healthy" || got.Status != c.status || got.Reason != c.reason || got.Message != c.message {
				t.Fatalf("Merge = %s/%s %q, want %s/%s %q", got.Status, got.Reason, got.Message, c.status, c.reason, c.message)
			}
		})
	}
}

func widget(name string, generation int64, conds ...*metav1.Condition) *testtype.Widget {
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: generation}}
	for _, c := range conds {
		w.Status.Conditions = append(w.Status.Conditions, *c)
	}
	return w
}

func TestMirror(t *testing.T) {
	observed := func(c *metav1.Condition, gen int64) *metav1.Condition { c.ObservedGeneration = gen; return c }
	cases := []struct {
		name    string
		child   *testtype.Widget
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"true", widget("orders", 2, observed(cond("Ready", T, "Succeeded", "last backup 2h ago"), 2)),
			T, "Succeeded", "orders: last backup 2h ago"},
		{"false", widget("orders", 2, observed(cond("Ready", F, "BackupFailed", "disk full"), 2)),
			F, "BackupFailed", "orders: disk full"},
		{"missing", widget("orders", 1, cond("Stalled", F, "X", "")),
			U, conditions.NotYetReportedReason, "orders: Ready not yet reported"},
		{"from an older generation", widget("orders", 3, observed(cond("Ready", T, "Succeeded", "ok"), 2)),
			U, conditions.NotObservedReason, "orders: generation 3 not observed yet (Ready was True: ok)"},
		{"no generation stamped: taken as is", widget("orders", 3, cond("Ready", F, "X", "m")),
			F, "X", "orders: m"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := conditions.Mirror(c.child, "Ready", "BackupHealthy")
			if got.Type != "BackupHealthy" || got.Status != c.status || got.Reason != c.reason || got.Message != c.message {
				t.Fatalf("Mirror = %s/%s %q, want %s/%s %q", got.Status, got.Reason, got.Message, c.status, c.reason, c.message)
			}
		})
	}
}

func TestAggregateAndSummary(t *testing.T) {
	children := []conditions.Object{
		widget("a", 1, cond("Ready", T, "Succeeded", "fine")),
		widget("b", 1, cond("Ready", F, "RestoreFailed", "checksum mismatch")),
		widget("c", 1),
	}
	got := conditions.Aggregate(children, "Ready", "RecoverabilityVerified")
	if got.Status != F || got.Reason != "RestoreFailed" || got.Message != "b: checksum mismatch; c: Ready not yet reported" {
		t.Fatalf("Aggregate = %+v", got)
	}
	// Stalled children: True is the issue.
	stalled := []conditions.Object{widget("a", 1, cond("Stalled", F, "Fine", "")), widget("b", 1, cond("Stalled", T, "InvalidSpec", "bad"))}
	if got := conditions.Aggregate(stalled, "Stalled", "ChildrenHealthy"); got.Status != F || got.Message != "b: bad" {
		t.Fatalf("Aggregate of Stalled = %+v", got)
	}

	parent := widget("plan", 4)
	conditions.SetMirror(parent, children[0], "Ready", "BackupHealthy")
	conditions.SetAggregate(parent, children[1:], "Ready", "RecoverabilityVerified")
	conditions.SetSummary(parent, cairnv1.ReadyCondition, "BackupHealthy", "RecoverabilityVerified", "ObjectivesMet")
	r := conditions.Get(parent, cairnv1.ReadyCondition)
	want := "RecoverabilityVerified: b: checksum mismatch; c: Ready not yet reported; ObjectivesMet: ObjectivesMet not yet reported"
	if r.Status != F || r.Reason != "RestoreFailed" || r.Message != want || r.ObservedGeneration != 4 {
		t.Fatalf("Ready = %+v\nwant message %q", r, want)
	}
	conditions.Set(parent, "RecoverabilityVerified", T, "Verified", "")
	conditions.Set(parent, "ObjectivesMet", T, "Met", "")
	conditions.SetSummary(parent, cairnv1.ReadyCondition, "BackupHealthy", "RecoverabilityVerified", "ObjectivesMet")
	if r := conditions.Get(parent, cairnv1.ReadyCondition); r.Status != T || r.Reason != "Succeeded" || r.Message != "BackupHealthy: a: fine" {
		t.Fatalf("all true: Ready = %+v", r)
	}
}

// What the merge functions produce passes the API server's validation of
// metav1.Condition (reason pattern, message length), even from children with
// no reason and enormous messages.
func TestMergedConditionsAreValid(t *testing.T) {
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "merge")
	if err != nil {
		t.Fatal(err)
	}
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "parent"}}
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("é", 20000) // 40000 bytes
	children := []conditions.Object{
		widget("a", 1, cond("Ready", F, "", huge)),
		widget("b", 1, cond("Ready", F, "X", huge)),
		widget("c", 1),
	}
	conditions.SetAggregate(w, children, "Ready", "ChildrenReady")
	conditions.SetMirror(w, children[0], "Ready", "AReady")
	conditions.SetSummary(w, cairnv1.ReadyCondition, "ChildrenReady", "AReady")
	if err := env.Client.Status().Update(ctx, w); err != nil {
		t.Fatalf("the API server rejected merged conditions: %v", err)
	}
	if got := conditions.Get(w, "ChildrenReady"); got.Reason != conditions.NoReasonReason || len(got.Message) > 32768 {
		t.Fatalf("ChildrenReady = %s, %d bytes", got.Reason, len(got.Message))
	}
}
