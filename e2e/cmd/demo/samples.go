package main

// The samples of platform/samples as the demo reads and applies them.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
)

// samples are the objects of platform/samples — what README tells a user to
// start from — as the demo applies them.
type samples struct {
	secrets []*unstructured.Unstructured
	// grants are the RoleBindings of the samples (the migration operator's
	// right to switch Secrets in the sample namespace), applied first.
	grants []*unstructured.Unstructured
	// pairs are the sample BackupJobs (PostgreSQL first, then MariaDB), each
	// with the sample RestoreJob that restores it.
	pairs []*pair
	// plan is the sample ProtectionPlan (its own BackupJob, prefix and
	// scratch database), applied beside the BackupJobs.
	plan *unstructured.Unstructured
	// migration is the sample MigrationJob, its target mapped to a second
	// database on the local PostgreSQL; applied with the others, cut over
	// once the restores and the plan's verification are shown.
	migration *unstructured.Unstructured
	// pitr is the sample BackupJob with spec.pointInTime (PostgreSQL: the
	// orders database again) and the sample RestoreJob to a time of it;
	// the BackupJob is applied with the others (its archiver starts at
	// once), the RestoreJob by the point-in-time step (pitr.go).
	pitr *pair
}

// pair is a sample BackupJob and the sample RestoreJob of its newest backup.
type pair struct {
	backup, restore *unstructured.Unstructured
	// What the demo saw happen: the first backup recorded Succeeded (and the
	// RestoreJob applied), the restore Succeeded.
	backedUp, restored time.Time
}

func (p *pair) engine() string {
	e, _, _ := unstructured.NestedString(p.backup.Object, "spec", "database", "engine")
	return e
}

// demoSchedule replaces the sample BackupJobs' nightly schedule, so that the
// first backups run within a minute (all in the same minute).
const demoSchedule = "* * * * *"

func readSamples(root string) (*samples, error) {
	files, err := filepath.Glob(filepath.Join(root, "platform", "samples", "*.yaml"))
	if err != nil {
		return nil, err
	}
	// The namespace admin's grants the samples need (switchSecret's opt-in).
	grants, err := filepath.Glob(filepath.Join(root, "platform", "samples", "grants", "*.yaml"))
	if err != nil {
		return nil, err
	}
	files = append(files, grants...)
	s := &samples{}
	var backups, restores []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			o := &unstructured.Unstructured{}
			if err := r.Decode(&o.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			switch o.GetKind() {
			case "":
				continue
			case "Secret":
				s.secrets = append(s.secrets, o)
			case "RoleBinding":
				s.grants = append(s.grants, o) // grants/migration-grant.yaml: switchSecret's opt-in
			case "BackupJob":
				backups = append(backups, o)
			case "RestoreJob":
				restores = append(restores, o)
			case "ProtectionPlan":
				s.plan = o
			case "MigrationJob":
				s.migration = o
			default:
				return nil, fmt.Errorf("%s: unexpected %s in the samples", f, o.GetKind())
			}
		}
	}
	for _, bj := range backups {
		p := &pair{backup: bj}
		_, pit, _ := unstructured.NestedMap(bj.Object, "spec", "pointInTime")
		for _, rj := range restores {
			src, _, _ := unstructured.NestedString(rj.Object, "spec", "source", "backupJob", "name")
			if src == bj.GetName() && rj.GetNamespace() == bj.GetNamespace() {
				p.restore = rj
			}
		}
		if p.restore == nil {
			return nil, fmt.Errorf("platform/samples has no RestoreJob of BackupJob %s", bj.GetName())
		}
		if pit {
			// Its schedule stays nightly: the demo asks for its one base.
			if s.pitr != nil {
				return nil, fmt.Errorf("platform/samples has two BackupJobs with spec.pointInTime (%s, %s): the demo runs one archiver",
					s.pitr.backup.GetName(), bj.GetName())
			}
			if err := unstructured.SetNestedField(bj.Object, demoMaxSegmentAge, "spec", "pointInTime", "maxSegmentAge"); err != nil {
				return nil, err
			}
			s.pitr = p
			continue
		}
		if err := unstructured.SetNestedField(bj.Object, demoSchedule, "spec", "schedule"); err != nil {
			return nil, err
		}
		s.pairs = append(s.pairs, p)
	}
	sort.SliceStable(s.pairs, func(i, j int) bool {
		return s.pairs[i].engine() == "postgres" && s.pairs[j].engine() != "postgres"
	})
	engines := map[string]bool{}
	for _, p := range s.pairs {
		engines[p.engine()] = true
	}
	if !engines["postgres"] || !engines["mysql"] || s.plan == nil || s.migration == nil || s.pitr == nil {
		return nil, errors.New("platform/samples lacks the PostgreSQL or the MariaDB BackupJob (with its RestoreJob), the point-in-time BackupJob (with its RestoreJob), the ProtectionPlan or the MigrationJob")
	}
	if err := unstructured.SetNestedField(s.plan.Object, demoSchedule, "spec", "backup", "schedule"); err != nil {
		return nil, err
	}
	return s, nil
}

func apply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	if err := c.Patch(ctx, o.DeepCopy(), client.Apply, client.FieldOwner("cairn-demo"), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

func applySamples(ctx context.Context, c client.Client, s *samples) error {
	objs := append(append([]*unstructured.Unstructured{}, s.grants...), s.secrets...)
	var names []string
	runNow := "demo-" + strconv.FormatInt(time.Now().Unix(), 10)
	for _, p := range s.pairs {
		// The first backup runs now (a run-now request), not at the next
		// minute: the schedule goes on every minute from there.
		ann := p.backup.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[backupv1.RunNowAnnotation] = runNow
		p.backup.SetAnnotations(ann)
		objs = append(objs, p.backup)
		names = append(names, p.backup.GetNamespace()+"/"+p.backup.GetName())
	}
	for _, o := range append(objs, s.plan, s.migration, s.pitr.backup) {
		if err := apply(ctx, c, o); err != nil {
			return err
		}
	}
	tz, _, _ := unstructured.NestedString(s.pairs[0].backup.Object, "spec", "timeZone")
	logf("applied platform/samples: the Secrets, MigrationJob %s/%s, BackupJobs %s and ProtectionPlan %s/%s, their schedules set to %q (every minute) in %s; first backups requested now (%s=%s)",
		s.migration.GetNamespace(), s.migration.GetName(), strings.Join(names, ", "), s.plan.GetNamespace(), s.plan.GetName(), demoSchedule, tz, backupv1.RunNowAnnotation, runNow)
	logf("applied BackupJob %s/%s with spec.pointInTime (maxSegmentAge set to %s for the demo): its archiver starts now, its base comes later",
		s.pitr.backup.GetNamespace(), s.pitr.backup.GetName(), demoMaxSegmentAge)
	return requestPlanRun(ctx, c, s.plan, runNow)
}

// requestPlanRun asks the plan's BackupJob (the orchestrator creates it,
// named after the plan) for a run now, as applySamples does for the sample
// BackupJobs. The orchestrator leaves annotations it does not set alone.
// Without it the plan's first backup comes at the next minute.
func requestPlanRun(ctx context.Context, c client.Client, plan *unstructured.Unstructured, id string) error {
	key := client.ObjectKey{Namespace: plan.GetNamespace(), Name: plan.GetName()}
	bj := &backupv1.BackupJob{}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, bj)
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return fmt.Errorf("waiting for protectionplan/%s's BackupJob: %w", key.Name, err)
	}
	patch := client.MergeFrom(bj.DeepCopy())
	if bj.Annotations == nil {
		bj.Annotations = map[string]string{}
	}
	bj.Annotations[backupv1.RunNowAnnotation] = id
	return c.Patch(ctx, bj, patch)
}
