#!/bin/sh
# Annotate each node with its provider's location, as the French seed does
# (node names carry the provider: scw-*, aws-*, dc-*). kg reads
# kilo.squat.ai/location before the topology.kubernetes.io/region label.
set -eu

# Annotate the Scaleway nodes
for node in $(kubectl get nodes | grep scw | awk '{print $1}'); do
  kubectl annotate node $node kilo.squat.ai/location="scaleway-paris"
done

# Annotate the AWS nodes
for node in $(kubectl get nodes | grep aws | awk '{print $1}'); do
  kubectl annotate node $node kilo.squat.ai/location="aws-euwest3"
done

# Annotate the on-premises nodes; they sit behind NAT, so they keep their
# mapping open towards the other locations.
for node in $(kubectl get nodes | grep dc | awk '{print $1}'); do
  kubectl annotate node $node kilo.squat.ai/location="lyon-dc"
  kubectl annotate node $node kilo.squat.ai/persistent-keepalive="25"
done
