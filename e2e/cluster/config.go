package cluster

import "net"

// kwokOwnNodesOnly makes kwok manage only the nodes `kwokctl scale node`
// creates (annotated kwok.x-k8s.io/node=fake): kwokctl's binary runtime
// starts kwok with --manage-all-nodes=true, which would also play the pods
// of the pod runner's node. And the API server calls a webhook Service at
// one of its endpoints (the pod's address; --enable-aggregator-routing):
// there is no kube-proxy on the local plane to route a Service's ClusterIP.
var kwokOwnNodesOnly = []byte(`---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
componentsPatches:
- name: kwok-controller
  extraArgs:
  - key: manage-all-nodes
    value: "false"
    override: true
  - key: manage-nodes-with-annotation-selector
    value: kwok.x-k8s.io/node=fake
- name: kube-apiserver
  extraArgs:
  - key: enable-aggregator-routing
    value: "true"
`)

// hostSANs adds every IPv4 address of the host's interfaces, down ones too,
// to the API server's serving certificate: pods on a network of their own
// (the pod runner's, Docker's bridge) reach it at the bridge's address, and
// kwokctl adds only the addresses of the interfaces that are up (docker0 is
// down while no container runs).
func hostSANs() []byte {
	out := "options:\n  kubeApiserverCertSANs:\n"
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				out += "  - " + ipn.IP.String() + "\n"
			}
		}
	}
	return []byte(out)
}
