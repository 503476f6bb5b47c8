// Package testtype is a small custom resource, Widget (test.cairn.dev/v1), used
// only by libs' tests against the real API server. Its CRD is generated into
// libs/testdata/crds by `make manifests`.
//
// +kubebuilder:object:generate=true
// +groupName=test.cairn.dev
// +versionName=v1
package testtype

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion of Widget.
	GroupVersion = schema.GroupVersion{Group: "test.cairn.dev", Version: "v1"}
	// SchemeBuilder registers Widget.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds Widget to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// WidgetSpec is a Widget's desired state.
type WidgetSpec struct {
	// Size is any number.
	// +optional
	Size int32 `json:"size,omitempty"`
}

// WidgetStatus is a Widget's observed state.
type WidgetStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Note string `json:"note,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Widget is a test resource.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec,omitempty"`
	// +kubebuilder:default={"observedGeneration":-1}
	Status WidgetStatus `json:"status,omitempty"`
}

// WidgetList is a list of Widgets.
// +kubebuilder:object:root=true
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

// GetConditions implements conditions.Object.
func (w *Widget) GetConditions() []metav1.Condition { return w.Status.Conditions }

// SetConditions implements conditions.Object.
func (w *Widget) SetConditions(c []metav1.Condition) { w.Status.Conditions = c }

func init() { SchemeBuilder.Register(&Widget{}, &WidgetList{}) }
