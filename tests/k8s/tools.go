//go:build tools

// Package tools records the commands this module exists to build, so that
// `go mod tidy` keeps their dependencies in go.mod and go.sum. The build tag
// keeps the file out of every real build (main packages cannot be imported).
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
