//go:build tools

// This file pins the root module's dependencies before all packages use them.
package kilofed

import (
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/kilofed/kilofed/mesh/topology"
	_ "github.com/miekg/dns"
	_ "github.com/vishvananda/netlink"
	_ "gopkg.in/yaml.v3"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/util/cert"
	_ "sigs.k8s.io/controller-runtime/pkg/client"
	_ "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
)
