#!/bin/sh
# Mark the two kinds of nodes. kilo.squat.ai/location is set twice: as a
# label, which the scheduler matches nodeSelector against, and as the
# annotation kg reads for its location (it wins over the
# topology.kubernetes.io/region label). The on-premises nodes get the
# sovereignty taint, so that only workloads that tolerate it run there.
set -eu
ONPREM=${ONPREM:-"fr-dc-1 fr-dc-2"}
CLOUD=${CLOUD:-"cloud-1 cloud-2"}

for node in $ONPREM; do
  kubectl label node $node kilo.squat.ai/location=on-premise-fr
  kubectl annotate node $node kilo.squat.ai/location=on-premise-fr
  # behind the datacenter's NAT: keep the tunnels to the cloud open
  kubectl annotate node $node kilo.squat.ai/persistent-keepalive=25
  kubectl taint node $node sovereignty=fr:NoSchedule
done

for node in $CLOUD; do
  kubectl label node $node kilo.squat.ai/location=public-cloud
  kubectl annotate node $node kilo.squat.ai/location=public-cloud
done
