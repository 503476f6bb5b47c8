package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NameLength checks an object's metadata.name against max: the longest
// name whose child objects (a Job named <name>-<suffix>) still fit in 63
// characters.
func NameLength(name string, max int) field.ErrorList {
	if len(name) > max {
		return field.ErrorList{field.TooLong(field.NewPath("metadata", "name"), name, max)}
	}
	return nil
}

// Attempts checks the retry and deadline fields every kind that runs agent
// Jobs shares: maxRetries (0-20) and activeDeadlineSeconds (one minute to
// maxDays days) under p, each message naming the kind's default.
func Attempts(maxRetries *int32, defaultRetries int32, deadline *int64, defaultDeadline int64, maxDays int64, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r := maxRetries; r != nil && (*r < 0 || *r > 20) {
		errs = append(errs, field.Invalid(p.Child("maxRetries"), *r,
			fmt.Sprintf("must be between 0 and 20; omit it for the default, %d", defaultRetries)))
	}
	if d, most := deadline, maxDays*86400; d != nil && (*d < 60 || *d > most) {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *d,
			fmt.Sprintf("must be between 60 (one minute) and %d (%d days) seconds; omit it for the default, %d", most, maxDays, defaultDeadline)))
	}
	return errs
}
