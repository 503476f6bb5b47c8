package v1

import (
	"testing"

	cairnv1 "cairn.dev/apis/meta/v1"
)

func TestSetDefaults(t *testing.T) {
	cases := []struct {
		name     string
		in       RestoreJobSpec
		retries  int32
		deadline int64
		port     int32
	}{
		{"postgres, all empty", RestoreJobSpec{Target: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine}}, 3, 3600, 5432},
		{"mysql port", RestoreJobSpec{Target: cairnv1.DatabaseRef{Engine: cairnv1.MySQLEngine}}, 3, 3600, 3306},
		{"unknown engine gets no port", RestoreJobSpec{Target: cairnv1.DatabaseRef{Engine: "oracle"}}, 3, 3600, 0},
		{"set values kept, maxRetries 0 included", RestoreJobSpec{
			Target:     cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Port: 6543},
			MaxRetries: new(int32(0)), ActiveDeadlineSeconds: new(int64(120)),
		}, 0, 120, 6543},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.in
			s.SetDefaults()
			if *s.MaxRetries != tc.retries || *s.ActiveDeadlineSeconds != tc.deadline || s.Target.Port != tc.port {
				t.Errorf("got maxRetries %d, deadline %d, port %d; want %d, %d, %d",
					*s.MaxRetries, *s.ActiveDeadlineSeconds, s.Target.Port, tc.retries, tc.deadline, tc.port)
			}
		})
	}
}
