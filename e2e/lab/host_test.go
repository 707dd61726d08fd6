package lab

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// hostSummary is what TestPlanHost compares of a planned host.
type hostSummary struct {
	Netns, Router                string
	PublicIP, PrivateIP, MgmtIP  string
	WANPort, MgmtLink, RouterLAN string
}

func summarize(l *Lab, h *Host) hostSummary {
	s := hostSummary{Netns: h.Netns, PublicIP: h.PublicIP.String(), WANPort: hostWANPort(h.index)}
	if h.Router != nil {
		s.Router = h.Router.Name
		s.PrivateIP = h.PrivateIP.String()
		s.RouterLAN = h.routerIP.String()
	}
	if h.MgmtIP.IsValid() {
		s.MgmtIP = h.MgmtIP.String()
		s.MgmtLink = hostMgmtLink(l.Spec.Name, h.index)
	}
	return s
}

func TestPlanHost(t *testing.T) {
	tests := []struct {
		name    string
		host    string
		opts    HostOptions
		n       int
		existed []HostOptions // hosts added before, named h1, h2...
		want    hostSummary
		wantErr error
	}{
		{
			name: "public host gets the first free address of 198.51.100.0/24 from .100",
			host: "seb-laptop", n: 1,
			want: hostSummary{Netns: "kfl-gold-h-seb-laptop", PublicIP: "198.51.100.100", WANPort: "kfl-h1"},
		},
		{
			name: "second default skips the first host's address",
			host: "gw", n: 2, existed: []HostOptions{{}},
			want: hostSummary{Netns: "kfl-gold-h-gw", PublicIP: "198.51.100.101", WANPort: "kfl-h2"},
		},
		{
			name: "NAT host behind a home router in 172.16.<n>.0/24",
			host: "home", n: 3, opts: HostOptions{NAT: true},
			want: hostSummary{Netns: "kfl-gold-h-home", Router: "kfl-gold-h-home-r", PublicIP: "198.51.100.100",
				PrivateIP: "172.16.3.10", RouterLAN: "172.16.3.1", WANPort: "kfl-h3"},
		},
		{
			name: "management link in the hosts' block of the lab's slot",
			host: "dev", n: 4, opts: HostOptions{Mgmt: true, PublicIP: netip.MustParseAddr("203.0.113.200")},
			want: hostSummary{Netns: "kfl-gold-h-dev", PublicIP: "203.0.113.200", WANPort: "kfl-h4",
				MgmtIP: "100.66.255.13", MgmtLink: "kfl-gold-h4"},
		},
		{name: "name not a DNS label", host: "Seb_Laptop", n: 1, wantErr: ErrInvalidHost},
		{name: "duplicate name", host: "h1", n: 2, existed: []HostOptions{{}}, wantErr: ErrInvalidHost},
		{name: "address of a node", host: "x", n: 1, opts: HostOptions{PublicIP: netip.MustParseAddr("203.0.113.10")}, wantErr: ErrInvalidHost},
		{name: "address of a router", host: "x", n: 1, opts: HostOptions{PublicIP: netip.MustParseAddr("198.51.100.1")}, wantErr: ErrInvalidHost},
		{name: "the WAN host's address", host: "x", n: 1, opts: HostOptions{PublicIP: WANHostIP}, wantErr: ErrInvalidHost},
		{name: "address outside the public ranges", host: "x", n: 1, opts: HostOptions{PublicIP: netip.MustParseAddr("8.8.8.8")}, wantErr: ErrInvalidHost},
		{name: "broadcast address", host: "x", n: 1, opts: HostOptions{PublicIP: netip.MustParseAddr("198.51.100.255")}, wantErr: ErrInvalidHost},
		{name: "too many hosts", host: "x", n: maxHosts + 1, wantErr: ErrInvalidHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := laidOut(t, twoClusterSpec(), 2)
			for i, o := range tt.existed {
				h, err := l.planHost("h"+string(rune('1'+i)), o, i+1)
				if err != nil {
					t.Fatal(err)
				}
				l.hosts = append(l.hosts, h)
			}
			h, err := l.planHost(tt.host, tt.opts, tt.n)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("planHost = %v, want an error wrapping %v", err, tt.wantErr)
				}
				t.Logf("error: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(l, h)); diff != "" {
				t.Errorf("planHost (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHostRouterRulesAndDescribe(t *testing.T) {
	l := laidOut(t, twoClusterSpec(), 0)
	for i, o := range []HostOptions{{Mgmt: true}, {NAT: true}} {
		h, err := l.planHost([]string{"dev", "home"}[i], o, i+1)
		if err != nil {
			t.Fatal(err)
		}
		l.hosts = append(l.hosts, h)
	}
	golden(t, "host-router-home", hostRouterRules(l.Host("home")))
	golden(t, "describe-hosts", l.Describe())
}
