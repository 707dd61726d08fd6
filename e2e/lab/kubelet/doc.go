// Package kubelet is the kilofed lab's kubelet stand-in: it makes one lab
// node (a network namespace) a Kubernetes Node and runs the Pods bound to it
// in their own network namespaces, as host programs (the images in the
// table below) or built-in workloads (every other image), so that real
// kube-controller-manager, kube-proxy and the kilofed agents see ordinary
// Ready nodes, Running pods, pod IPs and EndpointSlices.
//
// # Node
//
// Run creates or updates the Node (labels kubernetes.io/hostname, os and
// arch plus Config.Labels; Config.Annotations; spec.podCIDRs from
// Config.PodCIDRs, or waits for kube-controller-manager to allocate them),
// posts its status (InternalIP(s), ExternalIP, Hostname addresses; cpu,
// memory, pods capacity; nodeInfo with kubeletVersion v1.37.2; Ready=True;
// daemonEndpoints: the kubelet API's port) every 30 s, and renews the node
// Lease in kube-node-lease every 10 s.
//
// # Scheduling
//
// The stand-in runs the Pods whose spec.nodeName is its node, however that
// was set: by the lab's kube-scheduler (which binds Deployments', DaemonSets'
// and other unbound Pods through the pods/binding subresource) or by hand,
// as the seed's example does:
//
//	kubectl run test-pod-beijing --image=alpine --restart=Never \
//	  --overrides='{"spec":{"nodeName":"node-beijing"}}' -- sleep 3600
//
// # Pod network
//
// Each Pod gets the network namespace PodNetns(node netns, namespace, name), a veth pair
// (eth0 in the pod, "kflp"+hash in the node netns) and the lowest free
// address of each of the node's podCIDRs (network address and .1 skipped).
// Routing is Calico-style layer 3: the pod has its address as /32 (/128) and
// `default via 169.254.1.1 dev eth0 onlink` (IPv6: via fe80::1), the node
// end answers for the gateway (proxy_arp=1, plus a permanent neighbour entry
// in the pod) and holds `podIP/32 dev kflp...`; the node netns forwards.
// /etc/netns/<PodNetns>/resolv.conf points at Config.ClusterDNS with the
// usual search list and ndots:5, so `ip netns exec` gives the pod cluster DNS.
// hostNetwork pods run in the node netns with the node's addresses.
//
// # Host programs
//
// Containers of the images below run their own command, as a container
// runtime would, with this machine's programs standing in for the image's
// files: `ip netns exec <PodNetns> <argv>` (hostNetwork pods: the node's
// netns), in its own process group, from the container's workingDir (/
// when empty), output to the container log. The argv follows Docker:
// command replaces the image's ENTRYPOINT (and drops its CMD), args replace
// CMD, and both are $(VAR)-expanded from the container's environment as
// Kubernetes does ($(NAME) is NAME's value when defined and stays as
// written otherwise, $$ is a literal $).
//
//	image (repository, any tag)         ENTRYPOINT          CMD   runs
//	alpine/socat*                       socat               -     the host's socat (and sh, grep, awk...)
//	nicolaka/netshoot*                  -                   sh    the host's sh in place of the image's zsh
//	<registry>/.../kg                   kg                  -     Config.ImageBinDir/kg
//	<registry>/.../kilofed-controller   kilofed-controller  -     Config.ImageBinDir/kilofed-controller
//
// The repository is the image reference without tag, digest, docker.io/
// and library/. kilofed's images (the repository's last path element is kg
// or kilofed-controller, e.g. ghcr.io/kilofed/kg:v0.1.0) are host programs
// only when Config.ImageBinDir is set; a command whose argv[0] is the
// binary's name, bare or as any path, also runs the ImageBinDir copy. A
// program not found on PATH (or by its path) fails the run with exit code
// 127, and the container log says why. The environment is the container's
// (see Environment), not the kubelet's own. Such a container is Ready as
// soon as it runs (without a readiness probe). The lab fills ImageBinDir with $KILOFED_BIN, else the folder
// of its kilofed-lab binary when kg is there. hack/deps.sh installs the
// programs the MCS conformance suite's pods and execs use (socat,
// nslookup and dig, nc, dnsperf).
//
// # Environment
//
// Each run of a container (host program or built-in workload) gets its
// environment built as the kubelet builds it, in this order, a later
// definition of a name replacing an earlier one:
//
//   - PATH (a container runtime's default), HOSTNAME (the pod's name),
//     HOME=/root;
//   - the kubernetes Service's variables, as the kubelet gives every pod:
//     KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT,
//     KUBERNETES_SERVICE_PORT_HTTPS and KUBERNETES_PORT* (the Service
//     default/kubernetes read at each start; other Services' links are not
//     given);
//   - envFrom, in order: every key of the ConfigMap or Secret with the
//     prefix (names with '=' or non-printable characters skipped);
//   - env, in order: literal values with $(VAR) expanded from what precedes
//     them; fieldRef metadata.name, metadata.namespace, metadata.uid,
//     metadata.labels['k'], metadata.annotations['k'], spec.nodeName,
//     spec.serviceAccountName, status.podIP, status.podIPs, status.hostIP,
//     status.hostIPs (lists comma-separated, IPv4 first; hostNetwork pods'
//     pod IPs are the node's); resourceFieldRef limits.* and requests.* of
//     cpu, memory, ephemeral-storage and hugepages-* of the named container
//     (this one by default), divided by the divisor (default 1) and rounded
//     up, an unset limit being the node's allocatable amount and an unset
//     request 0; configMapKeyRef and secretKeyRef.
//
// A ConfigMap, Secret or key that is missing is skipped when the reference
// is optional; otherwise the container does not start: it waits with
// reason CreateContainerConfigError and a message saying what is missing,
// and is tried again every 2 s (no restart counted); the pod is Pending
// while none of its containers has started. Host programs run
// with exactly that environment; built-in workloads keep the kubelet's
// environment plus KFL_* variables. Commands exec'd into a container get
// the environment of its current run.
//
// # Volumes and the service account token
//
// Host programs get the pod's volumes as a container does: each run starts
// as `ip netns exec <PodNetns> <WorkloadCommand...> mount-exec --bind
// SRC:DST[:ro]... -- <argv>`; ip netns exec gives the run its own mount
// namespace (mounts do not propagate back), mount-exec bind-mounts each
// volumeMount there (subPath below its volume, readOnly as :ro) and execs
// the command in place, so the container's process keeps the run's PID.
// A missing mount point is created on this machine (an empty folder, or an
// empty file for a file); nothing is written into it from outside the
// run's namespace. All the volumes of a pod are made once, when its first
// host program starts, under Config.RootDir (a temporary folder by
// default; the lab gives each node its own), and all but hostPath are
// removed with the pod:
//
//	hostPath     <RootDir>/hostpath/<path>, so that the lab's nodes, which
//	             share this machine, each have their own /var/lib/kilo or
//	             /var/run/wireguard (kept when the pod goes); except /dev,
//	             /proc, /sys, /lib/modules, /usr/lib/modules and
//	             /run/xtables.lock (and what is below them), which are this
//	             machine's own. type is honoured: DirectoryOrCreate and
//	             FileOrCreate create, Directory, File, Socket, CharDevice and
//	             BlockDevice must exist as such; unset creates a missing
//	             folder, as container runtimes do.
//	emptyDir     <RootDir>/pods/<uid>/<name>
//	configMap    its keys (or items, with modes) as files; optional respected
//	secret       likewise (defaultMode honoured)
//	downwardAPI  fieldRef and resourceFieldRef items as for env
//	projected    serviceAccountToken, configMap, secret, downwardAPI sources
//	other kinds  an empty folder (logged)
//
// A serviceAccountToken source is a TokenRequest of the pod's
// ServiceAccount ("default" when unset) bound to the pod (name and UID),
// with its audience and expirationSeconds (at least 600; 3607 by
// default), renewed after 80% of its life for as long as the pod runs, the
// file replaced atomically. The ServiceAccount admission plugin adds
// the kube-api-access volume (token, ca.crt from the kube-root-ca.crt
// ConfigMap, namespace) mounted read-only at
// /var/run/secrets/kubernetes.io/serviceaccount; when the API server did not
// (envtest disables that plugin), the stand-in adds the same volume to host
// programs itself when the pod names its serviceAccountName (a token binds
// only to a pod of its account) and automountServiceAccountToken is not
// false, so that
// rest.InClusterConfig works unchanged with KUBERNETES_SERVICE_HOST/PORT. A
// volume that cannot be made (ConfigMap, Secret or key missing, hostPath of
// the wrong type, TokenRequest refused) makes the container wait with
// CreateContainerConfigError, tried again every 2 s. Built-in workloads
// have no mounts. securityContext, resource limits and the image's files
// are not applied: a host program runs as root with every capability, on
// this machine's filesystem below its mounts.
//
// # Workloads
//
// Containers of every other image are not run: each one is replaced by a
// workload.Main subcommand, started as
// `ip netns exec <PodNetns> <WorkloadCommand...> <args>` in its own process
// group, chosen from the container's image, command and ports:
//
//	image contains "udp-echo"                  udp echo on every containerPort (default 9090)
//	command/args "sleep N" or sh -c "sleep N"  sleep N seconds ("infinity": forever)
//	image contains "echo" (http-echo, ...)     HTTP echo on the TCP containerPorts (default 8080)
//	any other image with TCP containerPorts    HTTP echo on those ports (e.g. the seed's
//	                                           ml-inference on 8080)
//	anything else (alpine, busybox, ...)       sleep forever
//
// The HTTP echo answers "<pod> <cluster> <node>\n" at every path and "ok" at
// /healthz; the workload learns its pod, namespace, node and cluster from
// flags and KFL_* environment variables. UDP ports of non-udp-echo images are
// not served. Init containers are not run and are reported as completed.
// A container is Ready once its workload has bound its ports.
//
// When a container's process exits, the restartPolicy decides: Always (and OnFailure
// after a failure) restarts it after a backoff of 1, 2, 4, 8 then 10 s,
// counting restarts; otherwise the container is terminated with its exit
// code and, once every container is, the pod becomes Succeeded or Failed and
// its network is removed. Logs go to <LogDir>/<ns>_<pod>_<container>.log.
//
// # Probes
//
// Readiness and liveness probes run for every container, host program or
// built-in workload, once per run: after initialDelaySeconds, then every
// periodSeconds (default 10), each attempt bounded by timeoutSeconds
// (default 1). exec runs the command as `kubectl exec` would (in the pod's
// netns, with the run's environment; exit code 0 passes); httpGet sends
// GET scheme://host:port/path with the httpHeaders (a Host header sets the
// host) and User-Agent kube-probe/1.37, from inside the pod's netns
// (hostNetwork: the node's), host defaulting to the pod IP, HTTPS not
// verified, redirects not followed, 200-399 passing; tcpSocket passes when
// a connection opens. A port is a number or the name of a containerPort.
// gRPC and startup probes are not run (they count as passing).
//
// A readiness probe starts failing: the container is Ready once it runs
// (built-ins: has bound its ports) and successThreshold (default 1)
// attempts in a row passed, and unready again after failureThreshold
// (default 3) failures in a row; the pod's Ready and ContainersReady
// conditions follow, so EndpointSlices list the pod's address as not ready.
// Without a readiness probe a container is Ready as soon as it runs. A
// liveness probe failing failureThreshold times in a row stops the run
// (SIGTERM to its group, SIGKILL after 3 s); the restartPolicy then decides
// as for any exit. The built-in HTTP echo's /healthz answers 503 after a
// request to /healthz/fail and 200 again after one to /healthz/pass, so a
// lab test can make an endpoint unready.
//
// # Kubelet API
//
// With Config.Serving, Run serves the part of the kubelet API that the API
// server proxies to, so that `kubectl exec`, `kubectl logs` and
// `kubectl get --raw /api/v1/nodes/<node>/proxy/healthz` work:
//
//	/exec/{namespace}/{pod}/{container}        remote command, SPDY v1-v4 or WebSocket v1-v4
//	/exec/{namespace}/{pod}/{uid}/{container}  (k8s.io/cri-streaming's server side)
//	/containerLogs/{namespace}/{pod}/{container}
//	/healthz
//
// The Node publishes the listener's port as its kubelet endpoint and
// ServingConfig.Address as an InternalDNS address; the API server must
// prefer that type (--kubelet-preferred-address-types=InternalDNS,...).
// InternalIP and ExternalIP, which kubectl -o wide and the mesh read, do not
// change. Clients must present a certificate signed by
// ServingConfig.ClientCAs (the API server's --kubelet-client-certificate);
// each request is then authorized by a SubjectAccessReview on the node's
// proxy subresource (healthz: healthz or proxy), answers cached 5 min
// (denials 30 s), as a kubelet in webhook mode does. Bearer tokens are not
// accepted.
//
// An exec'd command runs as `ip netns exec <PodNetns> <argv>` (hostNetwork
// pods: the node's netns), or, for a host program with mounts, as
// `nsenter --target <its PID> --mount --net -- <argv>`, in the namespaces of
// the container's process, so that it sees the container's volumes and
// token (`kubectl exec ds/kilo -- wg show` finds the agent's sockets), with
// stdin, stdout, stderr or a terminal as asked, and kubectl exec returns
// its exit code. Otherwise the command runs as root on the machine's
// filesystem and processes, with the pod's /etc/netns resolv.conf (cluster
// DNS) and the environment of the container's current run (see
// Environment). Exec probes run the same way. The command's process group
// is killed when it exits (background children do not survive the exec),
// when the pod ends or is deleted, and when Run ends. Pods whose containers are not running refuse exec.
//
// containerLogs serves the container's log file: the output of its
// current run (previous=true: the run before), cut by tailLines and
// limitBytes; follow=true streams what the run writes next until it ends.
// stdout and stderr share the file and lines carry no time, so
// timestamps, sinceSeconds, sinceTime and stream=Stdout|Stderr are refused
// with 400 and a message saying so.
//
// Deleting a Pod (or its deletionTimestamp) stops its processes (SIGTERM to
// the group, SIGKILL after 3 s), removes its netns, veth, route and
// /etc/netns entry, and deletes the API object with grace period 0. When
// Run's context ends, every pod of the node is torn down the same way (the
// API objects stay).
//
// # Tests
//
// TestPrivilegedKubeletRunsPodInNetns runs Run against a real API server
// (envtest over the lab binaries) as root. It needs no workload binary: its
// TestMain runs workload.Main instead of the tests when the environment
// variable KFL_KUBELET_TEST_WORKLOAD=1 is set, and the test passes
// {"env", "KFL_KUBELET_TEST_WORKLOAD=1", <test binary>} as WorkloadCommand.
package kubelet
