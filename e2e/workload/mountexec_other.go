//go:build !linux

package workload

import "errors"

// runMountExec needs Linux mount namespaces.
func runMountExec([]string) error { return errors.New("mount-exec: needs Linux") }
