#!/usr/bin/env bash
# build.sh builds the lab's control-plane binaries (etcd, kube-apiserver,
# kube-controller-manager, kube-proxy, kubectl) at the versions pinned in
# ./k8s/go.mod and ./etcd/go.mod, and the lab tests' NetworkPolicy enforcer
# (kube-router, pinned in ./kube-router/go.mod), into a cache folder outside
# the repository keyed by those versions. A binary that is already there is not rebuilt.
#
# Usage: build.sh            build what is missing, print the folder
#        build.sh --print-dir print the folder only
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
k8s_version=v1.37.2
etcd_version=v3.6.16
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

build() { # build NAME MODULE_DIR PACKAGE
	local name=$1 mod=$2 pkg=$3
	if [[ -x $dir/$name ]]; then
		echo "lab-bins: $name present in $dir"
		return
	fi
	echo "lab-bins: building $name ($pkg) ..."
	local start=$SECONDS
	(cd "$here/$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/$name.tmp" "$pkg")
	mv "$dir/$name.tmp" "$dir/$name"
	echo "lab-bins: built $name in $((SECONDS - start))s"
}

build etcd etcd .
build kube-apiserver k8s k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s k8s.io/kubernetes/cmd/kube-controller-manager
build kube-proxy k8s k8s.io/kubernetes/cmd/kube-proxy
build kubectl k8s k8s.io/kubernetes/cmd/kubectl
build kube-router kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
echo "lab-bins: ready in $dir"
