package controller

import (
	"testing"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/agentjob"
)

// Every step's Job, in every mode and transfer, renders only what the
// agent parses (the contract; the agent's side is tested in
// agent/internal/config), with nothing added after rendering.
func TestStepJobsRenderTheContract(t *testing.T) {
	store := &cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "s3:9000", Bucket: "b", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}}
	variants := map[string]func(*migrationv1.MigrationJobSpec){
		"full direct": func(*migrationv1.MigrationJobSpec) {},
		"continuous": func(s *migrationv1.MigrationJobSpec) {
			s.Mode = migrationv1.ModeContinuous
			s.Cutover.SourceReadOnly = true
		},
		"full store, objects": func(s *migrationv1.MigrationJobSpec) {
			s.Transfer.Method, s.Transfer.Storage = migrationv1.TransferStore, store
			s.Objects = &migrationv1.ObjectSelector{Include: []string{"public.*"}, Exclude: []string{"public.tmp_*"}}
			s.Cutover.WritersStopped = true
		},
		"store, encrypted": func(s *migrationv1.MigrationJobSpec) {
			s.Transfer.Method, s.Transfer.Storage = migrationv1.TransferStore, store
			s.Transfer.Encryption = &migrationv1.TransferEncryption{
				Recipients:        cairnv1.RecipientsSource{ConfigMapKeyRef: &cairnv1.KeySelector{Name: "keys", Key: "recipients"}},
				IdentitySecretRef: cairnv1.KeySelector{Name: "key", Key: "identity"}}
		},
	}
	for name, mutate := range variants {
		mj := &migrationv1.MigrationJob{Spec: migrationv1.MigrationJobSpec{
			Source: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "src", Database: "app", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s"}},
			Target: migrationv1.TargetDatabase{DatabaseRef: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "tgt", Database: "app",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "t"}}},
		}}
		mj.Namespace, mj.Name = "ns", "m"
		mj.UID = "5f0c1d2e-0000-4000-8000-000000000001"
		mutate(&mj.Spec)
		spec := mj.Spec.DeepCopy()
		spec.SetDefaults()
		for _, step := range contract.Steps {
			t.Run(name+" "+step, func(t *testing.T) {
				as := stepSpec(mj, spec, step, &cairnv1.Artifact{Path: "a"}, "agent:1", jobLabels(mj, step))
				for _, p := range agentjob.ContractProblems(agentjob.PodTemplate(as)) {
					t.Error(p)
				}
				if _, tgt := sides(step, spec); tgt && as.Migration.Target == nil {
					t.Error("a step that reaches the target renders no target")
				}
			})
		}
	}
}

// A Store transfer's export gets the recipients, its import the identity,
// and no other step either; both are references the Jobs wait for.
func TestTransferEncryption(t *testing.T) {
	spec := &migrationv1.MigrationJobSpec{Transfer: migrationv1.TransferSpec{Method: migrationv1.TransferStore,
		Encryption: &migrationv1.TransferEncryption{
			Recipients:        cairnv1.RecipientsSource{SecretKeyRef: &cairnv1.KeySelector{Name: "keys", Key: "recipients"}},
			IdentitySecretRef: cairnv1.KeySelector{Name: "key", Key: "identity"}}}}
	for _, step := range contract.Steps {
		e := transferEncryption(step, spec)
		switch step {
		case contract.StepExport:
			if e == nil || e.Recipients == nil || e.Identity != nil {
				t.Errorf("export: %+v", e)
			}
		case contract.StepImport:
			if e == nil || e.Identity == nil || e.Recipients != nil {
				t.Errorf("import: %+v", e)
			}
		default:
			if e != nil {
				t.Errorf("%s renders keys: %+v", step, e)
			}
		}
	}
	if refs := localReferences("ns", spec); len(refs) < 2 {
		t.Errorf("local references %+v: want the recipients and (local target) the identity", refs)
	}
	if refs := importKeyReferences("ns", spec); len(refs) != 1 || refs[0].Name != "key" || refs[0].Keys[0] != "identity" {
		t.Errorf("import references %+v", refs)
	}
}
