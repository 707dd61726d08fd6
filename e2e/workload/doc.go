// Package workload holds the small programs that the kilofed lab runs inside
// pod network namespaces in place of container images, and the two clients
// that tests run inside those namespaces because curl is not installed there.
//
// Main dispatches on its first argument; the lab's binary exposes it as
// "kilofed-lab workload <subcommand> ...":
//
//	http     --port N [--port M ...] --name POD --namespace NS --cluster C --node NODE
//	         HTTP echo server: every path answers "<pod> <cluster> <node>\n"
//	         (text/plain), /healthz answers "ok\n" (503 "unready\n" after a
//	         request to /healthz/fail, until one to /healthz/pass: a lab test
//	         makes a readiness probe fail that way), /bytes/N streams N bytes
//	         (application/octet-stream, N up to MaxStreamBytes) from one
//	         shared buffer, for throughput measurements.
//	udp      --port N [--port M ...]
//	         UDP echo server: every datagram is sent back to its sender.
//	sleep    --seconds N
//	         holds the container open for N seconds (forever when N is 0).
//	get      URL [--timeout 5s] [--discard]
//	         HTTP GET client: prints the body, fails on an error or a non-2xx status.
//	         With --discard it reads the body to io.Discard and prints instead
//	         "bytes=<n> seconds=<s> mbps=<megabits per second>", timed from the
//	         request to the body's end.
//	udp-send ADDR MESSAGE [--timeout 5s]
//	         sends MESSAGE to ADDR (host:port) over UDP and prints the reply.
//	mount-exec [--bind SRC:DST[:ro]]... -- COMMAND [ARG...]
//	         bind-mounts each SRC on DST (creating a missing DST: a folder for a
//	         folder, an empty file for a file; read-only with :ro) in the
//	         current mount namespace, then execs COMMAND (found on PATH) in its
//	         place. The kubelet stand-in runs it under `ip netns exec`, which
//	         gives the process its own mount namespace, to mount a container's
//	         volumes; the mounts are seen by that process only.
//
// The servers log to stderr with log/slog, stop cleanly on SIGTERM or SIGINT,
// and, when given --ready-file PATH, create PATH once every port is bound so
// the kubelet stand-in can report the container Ready only when it answers.
// Flags that are not given fall back to the environment variables
// KFL_POD_NAME, KFL_POD_NAMESPACE, KFL_CLUSTER and KFL_NODE_NAME.
package workload
