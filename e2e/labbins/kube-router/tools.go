//go:build tools

// Package tools keeps kube-router in go.mod; build.sh builds its command.
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
