// Package lab runs real Kubernetes clusters and a real network on one Linux
// machine, without Docker, for kilofed's end-to-end tests and demo.
//
// # What Start builds
//
// Per cluster: a real etcd (127.0.0.1, free ports, data in the lab's temp
// dir), kube-apiserver (TLS from a per-cluster CA, service-account keys,
// Node,RBAC authorization), kube-controller-manager (allocates each
// node's podCIDR, builds EndpointSlices, creates ServiceAccounts, runs the
// Deployment, DaemonSet, StatefulSet and Job controllers) and kube-scheduler
// (user system:kube-scheduler, no leader election), which binds Pods
// without spec.nodeName to nodes, so Deployments and DaemonSets run as in
// any cluster. The binaries come from $KILOFED_LAB_BINS or `make lab-bins`
// (e2e/labbins/build.sh); the admin kubeconfig is Cluster.Kubeconfig.
//
// # Cluster DNS (Spec.CoreDNS)
//
// With Spec.CoreDNS (which needs Spec.KubeProxy) each cluster runs the real
// CoreDNS (pinned in e2e/labbins/coredns) as a process in the namespace of
// its first node (Cluster.DNSNode, in effect a hostNetwork CoreDNS pod),
// serving port 53 of that node's LAN address, reading the API as user
// system:coredns (a ClusterRole of that name: list/watch of services,
// endpoints, endpointslices, pods, namespaces). The lab creates the
// kube-system/kube-dns Service with ClusterIP ClusterSpec.ClusterDNS (.10 of
// the service CIDR, as in every cluster) and an EndpointSlice to CoreDNS,
// so kube-proxy takes the pods' queries there; the kubelet stand-in writes
// that nameserver into every pod's resolv.conf with the search list
// <ns>.svc.cluster.local svc.cluster.local cluster.local and ndots:5. The
// Corefile (Cluster.Corefile) serves the cluster domain and the reverse
// zones with the kubernetes plugin and forwards nothing: a name outside the
// cluster gets SERVFAIL, never a query to the Internet. Cluster.SetClusterSetDNS
// adds a clusterset.local stanza forwarding to a given address (kilofed's DNS
// server) and returns once CoreDNS's reload plugin has loaded it. Pods on
// other nodes reach CoreDNS when pod traffic between nodes is routed
// (Spec.PodRoutes inside a location, or the mesh). Namespace.QueryDNS sends
// a query (UDP or TCP) from inside a namespace, as a pod there would: to
// the kube-dns ClusterIP from Cluster.PodNamespace. CoreDNS adds about half
// a second to Start (0.3 to 0.6 s measured on the seed cluster).
//
// Per node: a network namespace kfl-<run>-<cluster>-<node> with
//
//   - eth0 on its location's LAN (the node's InternalIP), default route via
//     the location's router;
//   - mgmt0 on the management network, the only way to the API servers
//     (route 100.(64+s).0.0/16, no default route that way);
//   - the kubelet stand-in (package kubelet, in this process): it registers
//     the Node (InternalIP, ExternalIP for a public location, region label
//     topology.kubernetes.io/region=<location>, Ready, Lease) and runs the
//     Pods bound to the node (spec.nodeName, set by kube-scheduler or by hand) as
//     namespaces with a veth, an IP of the podCIDR and a built-in workload
//     chosen by image (EchoImage, UDPEchoImage, SleepImage);
//   - the real kube-proxy (iptables mode) when Spec.KubeProxy;
//   - whatever a test starts with Node.Start, and the real kg agent with
//     Node.StartAgent (a private /run/wireguard per node, so that every
//     embedded WireGuard device is kilo0; Process.NsEnter runs `wg show`
//     against it).
//
// Per location: a router namespace kfl-<run>-<cluster>-<location>-r with the
// LAN bridge lan0 (the router is the LAN's first address) and wan0 to the
// WAN namespace. A public location maps each node's public address 1:1 to
// its LAN address (DNAT/SNAT, with hairpin); a NAT location masquerades the
// whole LAN behind the router's address and lets nothing in.
//
// The WAN namespace kfl-<run>-wan plays the Internet: a /32 route per public
// address towards the router that owns it, proxy ARP, forwarding, and
// WANHostIP (203.0.113.254) on its loopback. Public addresses come only from
// 203.0.113.0/24 and 198.51.100.0/24; nothing leaves the lab's namespaces.
//
// # IPv6 (ClusterSpec.DualStack)
//
// A DualStack cluster also gets IPv6, all of it from 2001:db8::/32 and
// written with the digits of its IPv4 twin: pods 2001:db8:10::/56 (a /64
// per node, allocated by kube-controller-manager beside the IPv4 podCIDR),
// services 2001:db8:20::/112, LAN 10.0.1.0/24 also 2001:db8:0:1::/64 with
// node 10.0.1.10 at 2001:db8:0:1::10 (its second InternalIP) and the router
// at ::1. IPv6 addresses are global: the WAN routes each LAN /64 to its
// router over link-local next hops, and a NAT location's router lets no
// IPv6 connection in (a stateful firewall instead of NAT). Pods get an
// address of each family. The WAN has WANHostIP6 on its loopback.
//
// # Hosts on the Internet
//
// Lab.AddHost adds a namespace kfl-<run>-h-<name> on the WAN: a developer
// laptop or an external WireGuard peer. It has its own public address on
// wan0, or with HostOptions.NAT sits at 172.16.<n>.10 behind a home router
// kfl-<run>-h-<name>-r that masquerades it behind the public address and
// lets nothing in. HostOptions.Mgmt adds mgmt0 on the management bridge
// (100.(64+s).255.(9+n)), the host's only way to the API servers.
//
// # Management network and concurrent labs
//
// Each running lab takes a slot s (the lowest free one, 0 for the first lab
// on the machine) and a bridge kfl-<run>-m in the host namespace holding
// 100.(64+s).0.1/16. Cluster c's API server listens on 100.(64+s).c.1:6443
// only (nothing binds 0.0.0.0); node n of cluster c has 100.(64+s).c.(10+n)
// on mgmt0, whose host end kfl-<run>-<g> is enslaved to the bridge. So the
// first lab gets exactly 100.64.0.1 and 100.64.<c>.1, and two labs (two test
// packages, the demo and a test) never clash: every name carries the run id.
//
// # Teardown and the sweeper
//
// Lab.Close stops the kubelet stand-ins (which delete their pods), then the
// processes (SIGTERM to the process group, 5 s, SIGKILL, checked gone) in
// order: node processes, controller managers, API servers, etcds; then kills
// anything left in the lab's namespaces or running from its temp dir, and
// deletes the namespaces, host links and temp dir. Lock rule: every live lab
// holds a shared flock on /run/kfl-lab.lock. Start sweeps (see Sweep) only
// when it can take that lock exclusively, that is when no other lab lives;
// Sweep refuses otherwise. Sweeping and starting are serialized by
// /run/kfl-lab.setup.lock.
//
// # Tests
//
// StartT starts a lab for a test and closes it with t.Cleanup; it skips when
// the machine cannot run labs (not root, binaries missing) unless CI=true,
// where it fails.
package lab
