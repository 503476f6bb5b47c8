package manager

import (
	"reflect"
	"unique"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// maxInterned bounds the strings InternStrings shares: the short values that
// repeat across objects of a kind (label keys and values, namespaces,
// condition types, reasons and messages, schedules, Secret names). Longer
// strings are left alone.
const maxInterned = 256

// InternStrings replaces, in place, every settable string of obj (fields,
// slice elements, map keys and values, through pointers) of at most
// maxInterned bytes by its canonical copy (package unique), so that the
// thousands of cached objects of one kind hold one copy of each repeated
// value instead of one per object. Equal strings stay equal: nothing a
// reader can see changes. Unexported fields (time.Time, resource.Quantity
// internals) are not touched.
func InternStrings(obj any) {
	internValue(reflect.ValueOf(obj), 0)
}

func intern(s string) string {
	if s == "" || len(s) > maxInterned {
		return s
	}
	return unique.Make(s).Value()
}

func internValue(v reflect.Value, depth int) {
	if depth > 32 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			internValue(v.Elem(), depth+1)
		}
	case reflect.String:
		if v.CanSet() {
			if s := v.String(); s != "" {
				v.SetString(intern(s))
			}
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				internValue(v.Field(i), depth+1)
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return // []byte: data, not text
		}
		for i := 0; i < v.Len(); i++ {
			internValue(v.Index(i), depth+1)
		}
	case reflect.Map:
		if v.IsNil() || !v.CanSet() || v.Type().Key().Kind() != reflect.String {
			return
		}
		if v.Type().Elem().Kind() == reflect.String {
			// Rebuilt: map keys cannot be replaced in place.
			m := reflect.MakeMapWithSize(v.Type(), v.Len())
			it := v.MapRange()
			for it.Next() {
				k := reflect.New(v.Type().Key()).Elem()
				k.SetString(intern(it.Key().String()))
				e := reflect.New(v.Type().Elem()).Elem()
				e.SetString(intern(it.Value().String()))
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		}
	}
}

// TransformStripAndIntern is a cache transform: managedFields dropped (as
// the manager's default transform does) and strings interned
// (InternStrings). For kinds cached by the thousand whose objects repeat
// the same short values (about 0.2-0.3 KiB saved per object).
func TransformStripAndIntern() toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		obj, err := strip(obj)
		if err != nil {
			return obj, err
		}
		if _, tombstone := obj.(toolscache.DeletedFinalStateUnknown); !tombstone {
			InternStrings(obj)
		}
		return obj, nil
	}
}
