#!/usr/bin/env bash
# deps.sh installs the Debian packages that the lab and the tests use, when
# they are missing. As root it runs apt-get; otherwise it prints the exact
# command to run and fails.
set -euo pipefail

# command -> Debian package
declare -A need=(
	[ip]=iproute2
	[iptables]=iptables
	[conntrack]=conntrack
	[wg]=wireguard-tools
	[dot]=graphviz
	[tcpdump]=tcpdump
	[ping]=iputils-ping
	[ipset]=ipset
	[iperf3]=iperf3
	[socat]=socat
	[nslookup]=bind9-dnsutils
	[dig]=bind9-dnsutils
	[nc]=netcat-openbsd
	[curl]=curl
	[dnsperf]=dnsperf
	[nsenter]=util-linux
)
missing=()
for cmd in "${!need[@]}"; do
	command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
done
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
line="apt-get install -y --no-install-recommends ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
	echo "deps: missing packages; run as root: $line" >&2
	exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends "${missing[@]}"
}
