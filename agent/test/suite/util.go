package suite

import (
	"errors"
	"strconv"
)

func itoa(i int) string { return strconv.Itoa(i) }

func errorf(s string) error { return errors.New(s) }
