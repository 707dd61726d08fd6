package lab

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
)

// Describe returns a readable table of the lab: clusters with their API
// servers and ranges, locations with their LANs and routers, nodes with
// their addresses, podCIDRs and namespaces.
func (l *Lab) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lab %s: management %s on host bridge %s (host %s); WAN netns %s (Internet host %s)\n",
		l.Spec.Name, mgmtPrefix(l.slot), mgmtBridge(l.Spec.Name), mgmtHostIP(l.slot), l.wan.Name, WANHostIP)
	if l.Dir != "" {
		fmt.Fprintf(&b, "temp dir %s (component logs in logs/)\n", l.Dir)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tAPI SERVER\tPOD CIDR\tSERVICE CIDR\tWIREGUARD SUBNET\tDNS\tKUBECONFIG")
	for _, c := range l.clusters {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.APIServer, c.PodCIDR, c.ServiceCIDR,
			c.WireGuardSubnet, c.ClusterDNS, orDash(c.Kubeconfig))
	}
	tw.Flush()
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tLOCATION\tKIND\tLAN\tROUTER\tPUBLIC IP\tROUTER NETNS")
	for _, c := range l.clusters {
		for _, loc := range c.locations {
			kind := "public (1:1 NAT)"
			if loc.NAT {
				kind = "behind NAT"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, loc.Name, kind, loc.LAN, loc.RouterIP, loc.PublicIP, loc.Router.Name)
		}
	}
	tw.Flush()
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tNODE\tLOCATION\tLAN IP\tPUBLIC IP\tMGMT IP\tPOD CIDRS\tNETNS")
	for _, c := range l.clusters {
		for _, n := range c.nodes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, n.Name, n.Location, n.LANIP,
				addrOrDash(n.PublicIP), n.MgmtIP, prefixesOrDash(n.PodCIDRs()), n.Netns)
		}
	}
	tw.Flush()
	if hosts := l.Hosts(); len(hosts) > 0 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "HOST\tPUBLIC IP\tBEHIND NAT AS\tMGMT IP\tNETNS")
		for _, h := range hosts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", h.Name, h.PublicIP, addrOrDash(h.PrivateIP), addrOrDash(h.MgmtIP), h.Netns)
		}
		tw.Flush()
	}
	return b.String()
}

// LogTails returns the last n lines of every component log of the lab
// (control planes, kube-proxies, processes started on nodes, pod
// workloads), for a failed test's output.
func (l *Lab) LogTails(n int) string {
	if l.Dir == "" {
		return ""
	}
	var files []string
	_ = filepath.WalkDir(filepath.Join(l.Dir, "logs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".log") {
			files = append(files, path)
		}
		return nil
	})
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "\n--- last %d lines of %s ---\n%s\n", n, f, tailFile(f, n))
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func addrOrDash(a netip.Addr) string {
	if !a.IsValid() {
		return "-"
	}
	return a.String()
}

func prefixesOrDash(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "-"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
