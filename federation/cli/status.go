package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
	"github.com/kilofed/kilofed/federation/controller"
	"github.com/kilofed/kilofed/federation/discover"
	"github.com/kilofed/kilofed/federation/kube"
	"github.com/kilofed/kilofed/federation/mirror"
	kilov1 "github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
	"github.com/kilofed/kilofed/mesh/kgctl"
)

// Status is what `kilofed status -o json` prints.
type Status struct {
	// Clusters are this cluster first, then every joined one by ID.
	Clusters []ClusterStatus `json:"clusters"`
}

// ClusterStatus is one cluster of the federation as this cluster sees it.
type ClusterStatus struct {
	ID        string          `json:"id"`
	Local     bool            `json:"local"`
	State     string          `json:"state"`
	Problems  []string        `json:"problems,omitempty"`
	Gateways  []GatewayStatus `json:"gateways"`
	Locations int             `json:"locations"`
}

// GatewayStatus is one gateway: this cluster's as announced, or a remote's
// as mirrored in a Peer.
type GatewayStatus struct {
	Location string `json:"location"`
	Node     string `json:"node,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	Key      string `json:"key"`
	// Via is the location whose gateway carries this one's traffic with
	// other clusters (a location behind NAT); its handshakes are that
	// gateway's.
	Via             string     `json:"via,omitempty"`
	LatestHandshake *time.Time `json:"latestHandshake,omitempty"`
	RxBytes         int64      `json:"rxBytes,omitempty"`
	TxBytes         int64      `json:"txBytes,omitempty"`
}

func statusCommand() kgctl.Command {
	c := kgctl.Command{
		Name:    "status",
		Usage:   "status [-o table|json]",
		Summary: "this cluster and every joined one: gateways, handshakes, bytes, state, what is wrong",
	}
	c.Run = func(ctx context.Context, env *kgctl.Env, args []string) error {
		var format string
		fs := kgctl.NewFlagSet(env, c, `
Print this cluster and every cluster joined to it: per location the gateway
(node, endpoint, key prefix), the latest handshake and bytes of the tunnel, the
state, and what is wrong where something is.`)
		fs.StringVarP(&format, "output", "o", "table", "table or json")
		if err := kgctl.ParseFlags(fs, args); err != nil {
			return err
		}
		if format != "table" && format != "json" {
			return fmt.Errorf("%w: -o %q: use table or json", kgctl.ErrUsage, format)
		}
		local, err := kube.FromKubeconfig(env.Kubeconfig, env.Context)
		if err != nil {
			return err
		}
		st, err := Read(ctx, local.Client)
		if err != nil {
			return err
		}
		if format == "json" {
			enc := json.NewEncoder(env.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(st)
		}
		return st.WriteTable(env.Stdout, time.Now())
	}
	return c
}

// Read returns the federation as the cluster behind c sees it.
func Read(ctx context.Context, c client.Reader) (Status, error) {
	var st Status
	id, err := discover.ClusterID(ctx, c)
	if err != nil {
		return st, fmt.Errorf("%w: this cluster is not joined to any (kilofed join CLUSTER_B)", err)
	}
	self := ClusterStatus{ID: id, Local: true, State: "announced"}
	var ann fedv1.Announcement
	switch err := c.Get(ctx, client.ObjectKey{Namespace: fedv1.Namespace, Name: fedv1.AnnouncementName}, &ann); {
	case apierrors.IsNotFound(err):
		self.State = "not announced"
		self.Problems = append(self.Problems, "no Announcement: is kilofed-controller running here?")
	case err != nil:
		return st, fmt.Errorf("read this cluster's Announcement: %w", err)
	}
	for _, g := range ann.Spec.Gateways {
		self.Gateways = append(self.Gateways, GatewayStatus{Location: g.Location, Node: g.Node, Endpoint: g.Endpoint, Key: g.PublicKey, Via: g.Via})
	}
	self.Locations = len(self.Gateways)
	st.Clusters = append(st.Clusters, self)

	var rcs fedv1.RemoteClusterList
	if err := c.List(ctx, &rcs); err != nil {
		return st, fmt.Errorf("list RemoteClusters: %w", err)
	}
	sort.Slice(rcs.Items, func(i, j int) bool { return rcs.Items[i].Spec.ClusterID < rcs.Items[j].Spec.ClusterID })
	for _, rc := range rcs.Items {
		cs := ClusterStatus{ID: rc.Spec.ClusterID, State: "up"}
		for _, cond := range rc.Status.Conditions {
			if cond.Status != "True" && cond.Type != fedv1.Ready {
				cs.Problems = append(cs.Problems, cond.Type+" ("+cond.Reason+"): "+cond.Message)
			}
		}
		switch {
		case len(rc.Status.Conditions) == 0:
			cs.State = "unseen"
			cs.Problems = append(cs.Problems, "no status: is kilofed-controller running here?")
		case rc.Status.TunnelsUp == 0:
			cs.State = "down"
		case len(cs.Problems) > 0:
			cs.State = "degraded"
		}
		var peers kilov1.PeerList
		if err := c.List(ctx, &peers, client.MatchingLabels{mirror.LabelRemote: rc.Spec.ClusterID}); err != nil {
			return st, fmt.Errorf("list the Peers of %s: %w", rc.Spec.ClusterID, err)
		}
		for _, p := range peers.Items {
			g := GatewayStatus{Location: p.Labels[mirror.LabelLocation], Key: p.Spec.PublicKey, Endpoint: p.Status.Endpoint,
				RxBytes: p.Status.RxBytes, TxBytes: p.Status.TxBytes, Node: p.Annotations[mirror.AnnotationNode]}
			if g.Node == "" {
				g.Node = p.Name
			}
			if g.Endpoint == "" && p.Spec.Endpoint != nil {
				g.Endpoint = p.Spec.Endpoint.String()
			}
			if hs := p.Status.LatestHandshake; hs != nil {
				t := hs.Time
				g.LatestHandshake = &t
			}
			cs.Gateways = append(cs.Gateways, g)
			for _, c := range mirror.Carried(p.Annotations[mirror.AnnotationCarries]) {
				cs.Gateways = append(cs.Gateways, GatewayStatus{Location: c.Location, Node: c.Node, Via: g.Location})
			}
		}
		cs.Locations = len(cs.Gateways)
		st.Clusters = append(st.Clusters, cs)
	}
	return st, nil
}

// WriteTable prints st as one table, then the problems.
func (st Status) WriteTable(w io.Writer, now time.Time) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tLOCATION\tGATEWAY\tENDPOINT\tKEY\tHANDSHAKE\tRX/TX\tSTATE")
	for _, c := range st.Clusters {
		name := c.ID
		if c.Local {
			name += " (here)"
		}
		if len(c.Gateways) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t%s\n", name, c.State)
		}
		for _, g := range c.Gateways {
			hs, bytes := "-", "-"
			if g.LatestHandshake != nil {
				hs = now.Sub(*g.LatestHandshake).Round(time.Second).String() + " ago"
				if now.Sub(*g.LatestHandshake) > controller.TunnelFresh {
					hs += " (stale)"
				}
			}
			if !c.Local {
				bytes = human(g.RxBytes) + "/" + human(g.TxBytes)
			}
			key, endpoint := g.Key, orDash(g.Endpoint)
			if len(key) > 8 {
				key = key[:8] + "…"
			}
			if g.Via != "" {
				endpoint = "via " + g.Via
				if !c.Local {
					key, bytes = "-", "-"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, g.Location, g.Node, endpoint, orDash(key), hs, bytes, c.State)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range st.Clusters {
		for _, p := range c.Problems {
			fmt.Fprintf(w, "%s: %s\n", c.ID, p)
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fk", float64(n)/(1<<10))
	}
	return fmt.Sprint(n)
}
