// Package join links two clusters and unlinks them: the only step of the
// federation that uses both clusters' admin credentials, at the operator's
// hands. Join discovers both clusters, refuses any overlap of ranges or
// clash of IDs (writing nothing then), and creates in each cluster a
// ServiceAccount for the other with a Role that reads this cluster's
// Announcement and nothing else, whose short-lived token it stores in the
// other cluster with a RemoteCluster that says how to reach it. From then
// on each cluster's controller only reads the other. Unjoin removes all of
// it in both clusters, and nothing else.
package join
