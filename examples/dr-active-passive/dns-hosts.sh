#!/bin/sh
# dns-hosts.sh NAME ADDRESS: the lab's stand-in for a DNS provider's API,
# used as failover.sh's DNS_UPDATE by the test: it sets NAME's address in
# the hosts file HOSTS_FILE, which the users' machine resolves with. With
# a real DNS zone, DNS_UPDATE is your provider's command instead.
set -eu
: "${HOSTS_FILE:?}"
name=$1 addr=$2
tmp=$HOSTS_FILE.new
{ grep -v "[[:space:]]$name\$" "$HOSTS_FILE" 2>/dev/null || true; echo "$addr $name"; } >"$tmp"
mv "$tmp" "$HOSTS_FILE"
