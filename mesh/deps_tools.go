//go:build tools

// This file pins the mesh module's dependencies before all packages use them.
package mesh

import (
	_ "github.com/coreos/go-iptables/iptables"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/vishvananda/netlink"
	_ "golang.zx2c4.com/wireguard/device"
	_ "golang.zx2c4.com/wireguard/wgctrl"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime/pkg/client"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/yaml"
)
