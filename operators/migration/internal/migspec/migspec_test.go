package migspec

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
)

func valid() migrationv1.MigrationJobSpec {
	s := migrationv1.MigrationJobSpec{
		Source: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "a.shop.svc", Database: "orders",
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "a"}},
		Target: migrationv1.TargetDatabase{DatabaseRef: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "b.shop.svc", Database: "orders",
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "b"}}},
	}
	s.SetDefaults()
	return s
}

// s3Storage is a valid S3 store with a part size (0: unset).
func s3Storage(partMiB int32) *cairnv1.StorageSpec {
	s := &cairnv1.S3Storage{Endpoint: "http://s3:9000", Bucket: "moves", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}
	if partMiB != 0 {
		s.PartSizeMiB = &partMiB
	}
	return &cairnv1.StorageSpec{S3: s}
}

func TestValidateSpec(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*migrationv1.MigrationJobSpec)
		want   string // substring of the error; empty: valid
	}{
		{name: "valid", mutate: func(*migrationv1.MigrationJobSpec) {}},
		{name: "engines differ", mutate: func(s *migrationv1.MigrationJobSpec) { s.Target.Engine = cairnv1.MySQLEngine; s.Target.Port = 3306 },
			want: "spec.target.engine: Invalid value: \"mysql\": must be the source's engine (postgres)"},
		{name: "same database", mutate: func(s *migrationv1.MigrationJobSpec) { s.Target.Host = "A.shop.svc" },
			want: "is the source database"},
		{name: "same host and port, other database", mutate: func(s *migrationv1.MigrationJobSpec) { s.Target.Host = "a.shop.svc"; s.Target.Database = "orders_new" }},
		{name: "same address, other port", mutate: func(s *migrationv1.MigrationJobSpec) { s.Target.Host = "a.shop.svc"; s.Target.Port = 5433 }},
		{name: "same database, short name", mutate: func(s *migrationv1.MigrationJobSpec) { s.Target.Host = "a" },
			want: "is the source database"},
		{name: "same database, namespace", mutate: func(s *migrationv1.MigrationJobSpec) { s.Target.Host = "a.shop" },
			want: "is the source database"},
		{name: "same database, cluster domain and trailing dot", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Target.Host = "a.shop.svc.cluster.local."
		}, want: "is the source database"},
		{name: "same database, default port spelt out", mutate: func(s *migrationv1.MigrationJobSpec) { s.Target.Host = "a"; s.Target.Port = 5432 },
			want: "is the source database"},
		{name: "short name of another namespace's service", mutate: func(s *migrationv1.MigrationJobSpec) { s.Source.Host = "a.ops" }},
		// Direct: every Job runs here, kubeconfigSecretRef or not, so the
		// address means the same database.
		{name: "same address, direct, target said to be in another cluster", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Target.Host = "a.shop.svc"
			s.Target.KubeconfigSecretRef = &migrationv1.KubeconfigSecretRef{Name: "other", Key: "kubeconfig"}
		}, want: "is the source database"},
		{name: "same service name, store, target in another cluster", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Target.Host = "a.shop.svc"
			s.Target.KubeconfigSecretRef = &migrationv1.KubeconfigSecretRef{Name: "other", Key: "kubeconfig"}
			s.Transfer.Method = migrationv1.TransferStore
			s.Transfer.Storage = &cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "x"}}
		}},
		{name: "same public name, store, target in another cluster", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Source.Host, s.Target.Host = "db.example.com", "DB.example.com."
			s.Target.KubeconfigSecretRef = &migrationv1.KubeconfigSecretRef{Name: "other", Key: "kubeconfig"}
			s.Transfer.Method = migrationv1.TransferStore
			s.Transfer.Storage = &cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "x"}}
		}, want: "is the source database"},
		{name: "namespace without a remote cluster", mutate: func(s *migrationv1.MigrationJobSpec) { s.Target.Namespace = "db" },
			want: "spec.target.namespace: Forbidden: only with kubeconfigSecretRef"},
		{name: "continuous mysql", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Source.Engine, s.Target.Engine, s.Source.Port, s.Target.Port = cairnv1.MySQLEngine, cairnv1.MySQLEngine, 3306, 3306
			s.Mode = migrationv1.ModeContinuous
		}, want: "Continuous needs postgres"},
		{name: "continuous through a store", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Mode = migrationv1.ModeContinuous
			s.Transfer.Method = migrationv1.TransferStore
			s.Transfer.Storage = &cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "x"}}
		}, want: "Continuous needs transfer.method Direct"},
		{name: "replication without continuous", mutate: func(s *migrationv1.MigrationJobSpec) {
			q := resource.MustParse("1Gi")
			s.Replication = &migrationv1.ReplicationSpec{MaxRetainedWAL: &q}
		}, want: "spec.replication: Forbidden: only with mode Continuous"},
		{name: "bad include pattern", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Objects = &migrationv1.ObjectSelector{Include: []string{"public.orders", "public.a;drop"}}
		}, want: "spec.objects.include[1]: Invalid value: \"public.a;drop\""},
		{name: "bad exclude pattern", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Objects = &migrationv1.ObjectSelector{Exclude: []string{"a.b.c"}}
		}, want: "spec.objects.exclude[0]"},
		{name: "duplicate pattern", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Objects = &migrationv1.ObjectSelector{Include: []string{"sales", "sales"}}
		}, want: "Duplicate value"},
		{name: "good patterns", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Objects = &migrationv1.ObjectSelector{Include: []string{"public.order*", "sales", "a?b.*"}, Exclude: []string{"public.audit_log_*"}}
		}},
		{name: "store without storage", mutate: func(s *migrationv1.MigrationJobSpec) { s.Transfer.Method = migrationv1.TransferStore },
			want: "spec.transfer.storage: Required value"},
		{name: "direct with storage", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Transfer.Storage = &cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "x"}}
		}, want: "spec.transfer.storage: Forbidden"},
		{name: "switch the credentials Secret", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Cutover.SwitchSecret = &cairnv1.LocalObjectReference{Name: "a"}
		}, want: "must not be a credentials Secret"},
		{name: "bad target host", mutate: func(s *migrationv1.MigrationJobSpec) { s.Target.Host = "-oProxyCommand=x" },
			want: "spec.target.host"},
		{name: "part size beyond the default memory limit", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Transfer.Method = migrationv1.TransferStore
			s.Transfer.Storage = s3Storage(512)
		}, want: "spec.transfer.storage.s3.partSizeMiB: Invalid value: 512: does not fit the agent's memory limit (256Mi)"},
		{name: "part size within raised resources", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Transfer.Method = migrationv1.TransferStore
			s.Transfer.Storage = s3Storage(512)
			s.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("608Mi")}}
		}},
		{name: "part size beyond the resources' limit", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Transfer.Method = migrationv1.TransferStore
			s.Transfer.Storage = s3Storage(64)
			s.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}
		}, want: "spec.transfer.storage.s3.partSizeMiB: Invalid value: 64: a part of 64 MiB does not fit the agent's memory limit (spec.resources.limits.memory: 128Mi): one part is held in memory beside 96 MiB for the agent and its dump tool; use a partSizeMiB of at most 32 or raise spec.resources.limits.memory to at least 160Mi"},
		{name: "default part size beyond a small limit", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Transfer.Method = migrationv1.TransferStore
			s.Transfer.Storage = s3Storage(0)
			s.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")}}
		}, want: "spec.resources.limits.memory: Invalid value: 16: a part of 16 MiB does not fit the agent's memory limit (spec.resources.limits.memory: 100Mi): one part is held in memory beside 96 MiB for the agent and its dump tool; raise spec.resources.limits.memory to at least 112Mi"},
		{name: "resources without a memory limit", mutate: func(s *migrationv1.MigrationJobSpec) {
			s.Transfer.Method = migrationv1.TransferStore
			s.Transfer.Storage = s3Storage(512)
			s.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
		}},
		{name: "parallelism", mutate: func(s *migrationv1.MigrationJobSpec) { s.Transfer.Parallelism = new(int32(65)) },
			want: "spec.transfer.parallelism"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := valid()
			tc.mutate(&s)
			errs := ValidateSpec(&s, field.NewPath("spec"))
			if ferr := SameDatabaseError(&s, "shop", field.NewPath("spec")); ferr != nil {
				errs = append(errs, ferr)
			}
			got := errs.ToAggregate()
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("refused: %v", got)
			case tc.want != "" && got == nil:
				t.Fatalf("accepted, want %q", tc.want)
			case tc.want != "" && !strings.Contains(got.Error(), tc.want):
				t.Fatalf("error %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	old := valid()
	approved := valid()
	approved.Cutover.Approved = true
	if errs := ValidateUpdate(&old, &approved, field.NewPath("spec")); len(errs) > 0 {
		t.Errorf("approving refused: %v", errs)
	}
	changed := valid()
	changed.Target.Host = "c.shop.svc"
	changed.Verify = migrationv1.VerifyNone
	changed.Cutover.Approved = true
	errs := ValidateUpdate(&old, &changed, field.NewPath("spec"))
	if len(errs) != 2 || errs[0].Field != "spec.target" || errs[1].Field != "spec.verify" {
		t.Errorf("got %v, want spec.target and spec.verify refused", errs)
	}
	readOnly := valid()
	readOnly.Cutover.SourceReadOnly = true
	if errs := ValidateUpdate(&old, &readOnly, field.NewPath("spec")); len(errs) != 1 || errs[0].Field != "spec.cutover" {
		t.Errorf("got %v, want spec.cutover refused", errs)
	}
}

func TestValidateName(t *testing.T) {
	if errs := ValidateName(strings.Repeat("a", MaxNameLength)); len(errs) > 0 {
		t.Error(errs)
	}
	if errs := ValidateName(strings.Repeat("a", MaxNameLength+1)); len(errs) != 1 {
		t.Error("a name too long was accepted")
	}
}
