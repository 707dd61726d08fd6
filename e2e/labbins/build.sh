#!/usr/bin/env bash
# build.sh builds the lab's control-plane binaries (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy, kubectl) at the versions
# pinned in ./k8s/go.mod and ./etcd/go.mod, the clusters' DNS server (CoreDNS,
# pinned in ./coredns/go.mod) and the lab tests' NetworkPolicy enforcer
# (kube-router, pinned in ./kube-router/go.mod) and the helm CLI of the install
# test (pinned in ./helm/go.mod, the Helm library's version of the chart tests),
# into a cache folder outside
# the repository keyed by the Kubernetes and etcd versions. A binary that is
# already there is not rebuilt (CoreDNS is rebuilt when its -version is not
# the pinned one).
#
# Usage: build.sh            build what is missing, print the folder
#        build.sh --print-dir print the folder only
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
k8s_version=v1.37.2
etcd_version=v3.6.16
coredns_version=v1.15.0 # as in ./coredns/go.mod
helm_version=v3.22.0     # as in ./helm/go.mod
dir=${KILOFED_LAB_BINS:-${XDG_CACHE_HOME:-$HOME/.cache}/kilofed/lab-bins/k8s-${k8s_version}-etcd-${etcd_version}}

if [[ ${1:-} == --print-dir ]]; then
	echo "$dir"
	exit 0
fi
mkdir -p "$dir"

minor=${k8s_version#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build() { # build NAME MODULE_DIR PACKAGE [LDFLAGS]
	local name=$1 mod=$2 pkg=$3 flags=${4:-$ldflags}
	if [[ -x $dir/$name ]]; then
		echo "lab-bins: $name present in $dir"
		return
	fi
	echo "lab-bins: building $name ($pkg) ..."
	local start=$SECONDS
	(cd "$here/$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$flags" -o "$dir/$name.tmp" "$pkg")
	mv "$dir/$name.tmp" "$dir/$name"
	echo "lab-bins: built $name in $((SECONDS - start))s"
}

build etcd etcd .
build kube-apiserver k8s k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler k8s k8s.io/kubernetes/cmd/kube-scheduler
build kube-proxy k8s k8s.io/kubernetes/cmd/kube-proxy
build kubectl k8s k8s.io/kubernetes/cmd/kubectl
if [[ -x $dir/coredns ]] && ! "$dir/coredns" -version 2>/dev/null | grep -qx "CoreDNS-${coredns_version#v}"; then
	rm -f "$dir/coredns" # built at another pin
fi
build coredns coredns github.com/coredns/coredns "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$coredns_version"
build kube-router kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
build helm helm helm.sh/helm/v3/cmd/helm "-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
echo "lab-bins: ready in $dir"
