// Package installed_test runs the platform as it ships — `kustomize build` of
// a local overlay of platform/ (local images, webhook certificates without
// cert-manager) applied whole, each operator's Deployment with its two
// replicas running as containers of the operator's image on the pod runner,
// in-cluster configuration, probes, webhooks through their Services — and
// breaks it: the leader's container SIGKILLed, webhook calls while one
// replica is dead, a rolling restart under work.
package installed_test

import (
	"context"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/e2e/install"
)

var (
	env *install.Env
	k8s client.Client
	ctx = context.Background()
)

func TestMain(m *testing.M) {
	os.Exit(install.RunTests(m, install.Options{Nodes: 1, RealData: true, Installed: true}, &env,
		func(e *install.Env) { k8s = e.Client }))
}
