package conditions

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/apis/meta/v1"
)

// Reasons the mirror and merge functions set themselves.
const (
	// NotYetReportedReason: the child has no condition of that type (yet).
	NotYetReportedReason = "NotYetReported"
	// NotObservedReason: the child's condition describes an older
	// generation of it; its controller has not acted on the latest spec yet.
	NotObservedReason = "NotObserved"
	// NoReasonReason stands in for a condition without a reason.
	NoReasonReason = "NoReason"
)

// maxMessageItems is how many sources a merged message names before "and N more".
const maxMessageItems = 3

// maxMessageLength is metav1.Condition's limit on a message.
const maxMessageLength = 32768

// Source is one condition to merge.
type Source struct {
	// Name prefixes the condition's message ("orders-db: last run
	// failed"); empty for none.
	Name string
	// Type is the condition type asked for, used in the message of a
	// missing condition.
	Type string
	// Condition is nil when the source has not reported it (Unknown).
	Condition *metav1.Condition
	// NegativePolarity: True is the bad status (Stalled, Reconciling).
	NegativePolarity bool
}

// class orders sources: issues, then unknowns, then infos (good).
type class int

const (
	issue class = iota
	unknown
	info
)

func (s Source) class() class {
	switch {
	case s.Condition == nil || s.Condition.Status == metav1.ConditionUnknown:
		return unknown
	case (s.Condition.Status == metav1.ConditionTrue) == s.NegativePolarity:
		return issue
	}
	return info
}

func (s Source) reason() string {
	switch {
	case s.Condition == nil:
		return NotYetReportedReason
	case s.Condition.Reason == "":
		return NoReasonReason
	}
	return s.Condition.Reason
}

func (s Source) message() string {
	msg := ""
	switch {
	case s.Condition == nil:
		msg = s.Type + " not yet reported"
	case s.Condition.Message != "":
		msg = s.Condition.Message
	default:
		msg = s.reason()
	}
	if s.Name == "" {
		return msg
	}
	return s.Name + ": " + msg
}

// Merge merges sources into one condition of type typ (CAPI's aggregate and
// summary): False when any source is an issue (False; True for a negative
// polarity type), else Unknown when any is Unknown or missing, else True.
// Its reason is the first deciding source's; its message names the issues
// first, then the unknowns (for True: the sources' messages), each prefixed
// with its source's name, at most three and "and N more". With no sources it
// is Unknown. ObservedGeneration is left for Set to stamp.
func Merge(typ string, sources []Source) metav1.Condition {
	if len(sources) == 0 {
		return metav1.Condition{Type: typ, Status: metav1.ConditionUnknown, Reason: NotYetReportedReason, Message: "nothing to summarise yet"}
	}
	var byClass [3][]Source
	for _, s := range sources {
		c := s.class()
		byClass[c] = append(byClass[c], s)
	}
	out := metav1.Condition{Type: typ}
	var listed []Source
	switch {
	case len(byClass[issue]) > 0:
		out.Status = metav1.ConditionFalse
		out.Reason = byClass[issue][0].reason()
		listed = append(byClass[issue], byClass[unknown]...)
	case len(byClass[unknown]) > 0:
		out.Status = metav1.ConditionUnknown
		out.Reason = byClass[unknown][0].reason()
		listed = byClass[unknown]
	default:
		out.Status = metav1.ConditionTrue
		out.Reason = byClass[info][0].reason()
		for _, s := range byClass[info] {
			if s.Condition.Message != "" {
				listed = append(listed, s)
			}
		}
	}
	out.Message = joinMessages(listed)
	return out
}

func joinMessages(sources []Source) string {
	var parts []string
	for i, s := range sources {
		if i == maxMessageItems {
			parts = append(parts, fmt.Sprintf("and %d more", len(sources)-maxMessageItems))
			break
		}
		parts = append(parts, s.message())
	}
	return truncate(strings.Join(parts, "; "))
}

// truncate keeps msg within metav1.Condition's limit, on a rune boundary.
func truncate(msg string) string {
	if len(msg) <= maxMessageLength {
		return msg
	}
	return strings.ToValidUTF8(msg[:maxMessageLength-3], "") + "..."
}

// negative reports whether True is the bad status of a kstatus condition type.
func negative(typ string) bool {
	return typ == cairnv1.StalledCondition || typ == cairnv1.ReconcilingCondition
}

// childSource is child's condition childType as a merge source named after
// the child. A condition stamped with an older generation than the child's
// counts as Unknown (NotObserved): the child's controller has not acted on
// its latest spec.
func childSource(child Object, childType string) Source {
	s := Source{Name: child.GetName(), Type: childType, Condition: Get(child, childType), NegativePolarity: negative(childType)}
	if c := s.Condition; c != nil && c.ObservedGeneration != 0 && c.ObservedGeneration < child.GetGeneration() {
		s.Condition = &metav1.Condition{
			Type: c.Type, Status: metav1.ConditionUnknown, Reason: NotObservedReason,
			Message: fmt.Sprintf("generation %d not observed yet (%s was %s: %s)", child.GetGeneration(), c.Type, c.Status, c.Message),
		}
	}
	return s
}

// Mirror returns child's condition childType as condition targetType of a
// parent (CAPI's mirror): the same status and reason, the message prefixed
// with the child's name. A missing condition is Unknown (NotYetReported); one
// from an older generation of the child is Unknown (NotObserved).
func Mirror(child Object, childType, targetType string) metav1.Condition {
	s := childSource(child, childType)
	out := metav1.Condition{Type: targetType, Status: metav1.ConditionUnknown, Reason: s.reason(), Message: s.message()}
	if s.Condition != nil {
		out.Status = s.Condition.Status
	}
	out.Message = truncate(out.Message)
	return out
}

// Aggregate merges condition childType of every child into condition
// targetType (see Merge), each child's message prefixed with its name; a
// child without it, or with one from an older generation of it, is Unknown.
// Stalled and Reconciling have negative polarity (True is the issue).
func Aggregate(children []Object, childType, targetType string) metav1.Condition {
	sources := make([]Source, 0, len(children))
	for _, c := range children {
		sources = append(sources, childSource(c, childType))
	}
	return Merge(targetType, sources)
}

// Summary merges obj's own conditions of the given types into condition
// targetType (usually Ready; see Merge), each message prefixed with its type.
// A missing condition is Unknown; Stalled and Reconciling have negative
// polarity.
func Summary(obj Object, targetType string, types ...string) metav1.Condition {
	sources := make([]Source, 0, len(types))
	for _, t := range types {
		sources = append(sources, Source{Name: t, Type: t, Condition: Get(obj, t), NegativePolarity: negative(t)})
	}
	return Merge(targetType, sources)
}

// SetMirror sets Mirror(child, childType, targetType) on parent.
func SetMirror(parent, child Object, childType, targetType string) {
	setCondition(parent, Mirror(child, childType, targetType))
}

// SetAggregate sets Aggregate(children, childType, targetType) on parent.
func SetAggregate(parent Object, children []Object, childType, targetType string) {
	setCondition(parent, Aggregate(children, childType, targetType))
}

// SetSummary sets Summary(obj, targetType, types...) on obj.
func SetSummary(obj Object, targetType string, types ...string) {
	setCondition(obj, Summary(obj, targetType, types...))
}

func setCondition(obj Object, c metav1.Condition) {
	Set(obj, c.Type, c.Status, c.Reason, c.Message)
}
