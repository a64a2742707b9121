//go:build tools

// Package tools pins the Kubernetes commands the end-to-end tests run, so that `go mod tidy`
// keeps their dependencies in go.sum. Nothing here is compiled into the product; build.sh builds
// the binaries into a cache outside the repository.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
