#!/bin/sh
# failover.sh: the runbook, once production is declared lost (an alert on
# the loss of its nodes' heartbeat): check that production is gone and
# that DR is whole, then move the users' name to DR.
#
#   DR_ENTRY=<address the users reach DR's shop at> \
#   DNS_UPDATE=<command: DNS_UPDATE NAME ADDRESS sets NAME's A record> \
#   ./failover.sh
#
# Contexts: prod and dr (kubectl, kilofed). NAME defaults to
# shop.example.com. Nothing here changes the DR cluster: its shop runs
# already, its tunnels are up.
set -eu
: "${DR_ENTRY:?set DR_ENTRY to the address users reach DR at}"
: "${DNS_UPDATE:?set DNS_UPDATE to the command that repoints a DNS name}"
NAME=${NAME:-shop.example.com}

# 1. Production is lost: its API server does not answer. While it does,
# refuse: both sites would serve (and take writes) at once.
if kubectl --context prod --request-timeout=3s get --raw /readyz >/dev/null 2>&1; then
	echo "production's API server answers: not failing over" >&2
	exit 1
fi
echo "==> production's API server does not answer"

# 2. DR is whole: its nodes are Ready and its shop has all its replicas.
kubectl --context dr wait --for=condition=Ready nodes --all --timeout=30s
kubectl --context dr -n shop rollout status deployment/shop --timeout=60s
kubectl --context dr -n shop get pods -o wide

# 3. The users: NAME now points at DR.
$DNS_UPDATE "$NAME" "$DR_ENTRY"
echo "==> $NAME points at DR ($DR_ENTRY)"
