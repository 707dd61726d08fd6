package cli

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/spf13/pflag"

	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/federation/join"
	"github.com/kilofed/kilofed/federation/kube"
	"github.com/kilofed/kilofed/mesh/kgctl"
)

// Commands returns join, unjoin and status.
func Commands() []kgctl.Command {
	return []kgctl.Command{joinCommand(), unjoinCommand(), statusCommand()}
}

// remoteFlags select the other cluster of a join or unjoin.
type remoteFlags struct {
	context, kubeconfig string
}

func (r *remoteFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&r.context, "remote-context", "", "kubeconfig context of the other cluster (default: the CLUSTER_B argument)")
	fs.StringVar(&r.kubeconfig, "remote-kubeconfig", "", "kubeconfig file of the other cluster (default: --kubeconfig's)")
}

// clusters opens this cluster (--kubeconfig, --context) and the other one.
func (r *remoteFlags) clusters(env *kgctl.Env, args []string) (*kube.Cluster, *kube.Cluster, error) {
	ctxName := r.context
	switch {
	case len(args) == 1 && ctxName == "":
		ctxName = args[0]
	case len(args) > 1, len(args) == 1 && args[0] != ctxName:
		return nil, nil, fmt.Errorf("%w: give the other cluster once, as CLUSTER_B or --remote-context", kgctl.ErrUsage)
	case len(args) == 0 && ctxName == "" && r.kubeconfig == "":
		return nil, nil, fmt.Errorf("%w: which cluster? give its kubeconfig context as CLUSTER_B", kgctl.ErrUsage)
	}
	local, err := kube.FromKubeconfig(env.Kubeconfig, env.Context)
	if err != nil {
		return nil, nil, fmt.Errorf("this cluster: %w", err)
	}
	kc := r.kubeconfig
	if kc == "" {
		kc = env.Kubeconfig
	}
	remote, err := kube.FromKubeconfig(kc, ctxName)
	if err != nil {
		return nil, nil, fmt.Errorf("the other cluster: %w", err)
	}
	return local, remote, nil
}

func joinCommand() kgctl.Command {
	c := kgctl.Command{
		Name:    "join",
		Usage:   "join CLUSTER_B [flags]",
		Summary: "link this cluster and another: checks, scoped read-only credentials both ways, tunnels",
	}
	c.Run = func(ctx context.Context, env *kgctl.Env, args []string) error {
		var (
			r                    remoteFlags
			id, remoteID         string
			api, remoteAPI       string
			pods, remotePods     []string
			services, remoteSvcs []string
			dryRun               bool
			wait, ttl            time.Duration
		)
		fs := kgctl.NewFlagSet(env, c, `
Link this cluster (--context) and CLUSTER_B (a kubeconfig context) into one
federation. join discovers both clusters' pod, Service and WireGuard ranges and
IDs, refuses any overlap with each other or with the clusters either is already
joined to (writing nothing then), and creates in each cluster a ServiceAccount
for the other whose token may only read this cluster's Announcement. Each
cluster's kilofed-controller then mirrors the other's gateways as Peers. Running
join again changes nothing. Three or more clusters: join each pair.`)
		r.register(fs)
		fs.StringVar(&id, "cluster-id", "", "ID of this cluster if it has none yet (default: the context's name); never changed once set")
		fs.StringVar(&remoteID, "remote-cluster-id", "", "ID of the other cluster if it has none yet (default: its context's name)")
		fs.StringVar(&api, "api-server", "", "URL the other cluster reaches this API server at (default: the kubeconfig's)")
		fs.StringVar(&remoteAPI, "remote-api-server", "", "URL this cluster reaches the other API server at (default: the kubeconfig's)")
		fs.StringSliceVar(&pods, "pod-cidr", nil, "pod ranges of this cluster, where its Nodes carry no podCIDRs")
		fs.StringSliceVar(&remotePods, "remote-pod-cidr", nil, "pod ranges of the other cluster, where its Nodes carry no podCIDRs")
		fs.StringSliceVar(&services, "service-cidr", nil, "Service ranges of this cluster (default: its ServiceCIDR objects)")
		fs.StringSliceVar(&remoteSvcs, "remote-service-cidr", nil, "Service ranges of the other cluster (default: its ServiceCIDR objects)")
		fs.BoolVar(&dryRun, "dry-run", false, "print what would be written, write nothing")
		fs.DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for the first handshake between the clusters (0: don't wait)")
		fs.DurationVar(&ttl, "token-ttl", join.DefaultTokenTTL, "lifetime of the issued tokens (the controllers renew them)")
		if err := kgctl.ParseFlags(fs, args); err != nil {
			return err
		}
		local, remote, err := r.clusters(env, fs.Args())
		if err != nil {
			return err
		}
		lr, err := rangeOptions("--pod-cidr", pods, "--service-cidr", services)
		if err != nil {
			return err
		}
		rr, err := rangeOptions("--remote-pod-cidr", remotePods, "--remote-service-cidr", remoteSvcs)
		if err != nil {
			return err
		}
		return join.Join(ctx, join.Options{
			Local:  join.Side{Cluster: local, ID: id, Ranges: lr, APIServer: api},
			Remote: join.Side{Cluster: remote, ID: remoteID, Ranges: rr, APIServer: remoteAPI},
			DryRun: dryRun, Wait: wait, TokenTTL: ttl, Out: env.Stdout,
		})
	}
	return c
}

func unjoinCommand() kgctl.Command {
	c := kgctl.Command{
		Name:    "unjoin",
		Usage:   "unjoin CLUSTER_B [flags]",
		Summary: "remove every link between this cluster and another (Peers, credentials, objects)",
	}
	c.Run = func(ctx context.Context, env *kgctl.Env, args []string) error {
		var (
			r         remoteFlags
			localOnly bool
		)
		fs := kgctl.NewFlagSet(env, c, `
Remove, in both clusters, the RemoteCluster, the mirrored Peers and the
credentials that link this cluster and CLUSTER_B. Links to other clusters and
Peers written by users are not touched.

With --local-only, CLUSTER_B is the other cluster's ID (as kubectl get
remoteclusters shows it) and only this cluster's side is removed, without
reading the other one: the form for a cluster that is lost or unreachable.
The other cluster's token stops working here at once; its side of the link
stays until it is removed there.`)
		r.register(fs)
		fs.BoolVar(&localOnly, "local-only", false, "remove only this cluster's side of the link; CLUSTER_B is the other cluster's ID, which is not contacted")
		if err := kgctl.ParseFlags(fs, args); err != nil {
			return err
		}
		if localOnly {
			if len(fs.Args()) != 1 || r.context != "" || r.kubeconfig != "" {
				return fmt.Errorf("%w: --local-only takes the other cluster's ID as CLUSTER_B, and no --remote-context or --remote-kubeconfig", kgctl.ErrUsage)
			}
			local, err := kube.FromKubeconfig(env.Kubeconfig, env.Context)
			if err != nil {
				return fmt.Errorf("this cluster: %w", err)
			}
			return join.UnjoinLocal(ctx, local, fs.Args()[0], env.Stdout)
		}
		local, remote, err := r.clusters(env, fs.Args())
		if err != nil {
			return err
		}
		return join.Unjoin(ctx, local, remote, env.Stdout)
	}
	return c
}

func rangeOptions(podFlag string, pods []string, svcFlag string, svcs []string) (discover.Options, error) {
	var o discover.Options
	var err error
	if o.PodCIDRs, err = prefixes(podFlag, pods); err != nil {
		return o, err
	}
	o.ServiceCIDRs, err = prefixes(svcFlag, svcs)
	return o, err
}

func prefixes(flag string, ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %s %q is not a CIDR", kgctl.ErrUsage, flag, s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
