// Package crdtest checks that the CRD schemas generated from the apis
// markers refuse the hostile values cairn.dev/libs/validation refuses, on a
// real kube-apiserver without any webhook: a webhook-less install is
// protected too. It holds tests only.
package crdtest
