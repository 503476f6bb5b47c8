package v1

import (
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/diff"

	cairnv1 "cairn.dev/apis/meta/v1"
)

func TestSetDefaults(t *testing.T) {
	cases := []struct {
		name string
		in   BackupJobSpec
		want BackupJobSpec
	}{{
		name: "postgres, everything empty",
		in:   BackupJobSpec{Database: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine}},
		want: BackupJobSpec{
			Database:   cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Port: 5432},
			TimeZone:   "UTC",
			MaxRetries: new(int32(3)), ActiveDeadlineSeconds: new(int64(3600)),
			DeletionPolicy: DeletionPolicyRetain,
		},
	}, {
		name: "mysql port",
		in:   BackupJobSpec{Database: cairnv1.DatabaseRef{Engine: cairnv1.MySQLEngine}},
		want: BackupJobSpec{
			Database:   cairnv1.DatabaseRef{Engine: cairnv1.MySQLEngine, Port: 3306},
			TimeZone:   "UTC",
			MaxRetries: new(int32(3)), ActiveDeadlineSeconds: new(int64(3600)),
			DeletionPolicy: DeletionPolicyRetain,
		},
	}, {
		name: "unknown engine gets no port",
		in:   BackupJobSpec{Database: cairnv1.DatabaseRef{Engine: "oracle"}},
		want: BackupJobSpec{
			Database:   cairnv1.DatabaseRef{Engine: "oracle"},
			TimeZone:   "UTC",
			MaxRetries: new(int32(3)), ActiveDeadlineSeconds: new(int64(3600)),
			DeletionPolicy: DeletionPolicyRetain,
		},
	}, {
		name: "set values are kept, maxRetries 0 included",
		in: BackupJobSpec{
			Database:      cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Port: 6543},
			TimeZone:      "Asia/Shanghai",
			RetentionDays: 30, MaxRetries: new(int32(0)), ActiveDeadlineSeconds: new(int64(7200)),
			DeletionPolicy: DeletionPolicyDelete,
		},
		want: BackupJobSpec{
			Database:      cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Port: 6543},
			TimeZone:      "Asia/Shanghai",
			RetentionDays: 30, MaxRetries: new(int32(0)), ActiveDeadlineSeconds: new(int64(7200)),
			DeletionPolicy: DeletionPolicyDelete,
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bj := &BackupJob{Spec: tc.in}
			bj.Spec.SetDefaults()
			if !apiequality.Semantic.DeepEqual(tc.want, bj.Spec) {
				t.Errorf("(-want +got):\n%s", diff.Diff(tc.want, bj.Spec))
			}
		})
	}
}

func TestRetentionDaysOrDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec BackupJobSpec
		want int32
	}{
		{"absent: 7 days", BackupJobSpec{}, 7},
		{"set", BackupJobSpec{RetentionDays: 30}, 30},
		{"calendar tiers replace it", BackupJobSpec{Retention: &RetentionPolicy{KeepDaily: 7}}, 0},
		{"an object stored with both: the tiers win", BackupJobSpec{RetentionDays: 7, Retention: &RetentionPolicy{KeepLast: 1}}, 0},
	} {
		if got := tc.spec.RetentionDaysOrDefault(); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}
