package main

import (
	"bufio"
	"bytes"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/kilofed/kilofed/mesh/topology"
)

var prefixCmp = cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })

func TestFlagsGiveTheTopologyOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    topology.Options
		wantErr string
	}{
		{
			name: "Kilo's defaults",
			args: []string{"--hostname=n1"},
			want: topology.Options{
				Granularity: topology.LocationGranularity, Subnet: netip.MustParsePrefix("10.4.0.0/16"), Port: 51820,
				Encapsulate: topology.EncapsulateAlways, Links: topology.Links{WireGuard: "kilo0"}, MeshKeepalive: 25 * time.Second,
			},
		},
		{
			name: "the Chinese seed's DaemonSet args",
			args: []string{"--kubeconfig=/etc/kubernetes/kubeconfig", "--hostname=node-beijing", "--mesh-granularity=location", "--subnet=10.5.0.0/16", "--encapsulate=never"},
			want: topology.Options{
				Granularity: topology.LocationGranularity, Subnet: netip.MustParsePrefix("10.5.0.0/16"), Port: 51820,
				Encapsulate: topology.EncapsulateNever, Links: topology.Links{WireGuard: "kilo0"}, MeshKeepalive: 25 * time.Second,
			},
		},
		{
			name: "service ranges, no local routes, another interface",
			args: []string{"--hostname=n1", "--service-cidr=10.96.0.0/12, fd10:96::/112", "--local=false", "--interface=wg0", "--port=51821", "--mesh-keepalive=0"},
			want: topology.Options{
				Granularity: topology.LocationGranularity, Subnet: netip.MustParsePrefix("10.4.0.0/16"), Port: 51821,
				Encapsulate: topology.EncapsulateAlways, Links: topology.Links{WireGuard: "wg0"}, NoLocalRoutes: true,
				ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd10:96::/112")},
			},
		},
		{
			name: "service ranges repeated, as Kilo takes them",
			args: []string{"--hostname=n1", "--service-cidr=10.96.0.0/12", "--service-cidr=fd10:96::/112,10.100.0.0/16"},
			want: topology.Options{
				Granularity: topology.LocationGranularity, Subnet: netip.MustParsePrefix("10.4.0.0/16"), Port: 51820,
				Encapsulate: topology.EncapsulateAlways, Links: topology.Links{WireGuard: "kilo0"}, MeshKeepalive: 25 * time.Second,
				ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd10:96::/112"), netip.MustParsePrefix("10.100.0.0/16")},
			},
		},
		{name: "bad granularity", args: []string{"--hostname=n1", "--mesh-granularity=region"}, wantErr: `--mesh-granularity "region": invalid value: use location, full or cross`},
		{name: "bad encapsulate", args: []string{"--hostname=n1", "--encapsulate=ipip"}, wantErr: `--encapsulate "ipip": invalid value: use never, crosssubnet or always`},
		{name: "bad subnet", args: []string{"--hostname=n1", "--subnet=10.5.0.0"}, wantErr: `--subnet "10.5.0.0"`},
		{name: "bad service range", args: []string{"--hostname=n1", "--service-cidr=10.96.0.0/33"}, wantErr: `--service-cidr "10.96.0.0/33"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.topologyOptions()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, prefixCmp); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// manifestArgs reads testdata/kilo_manifest_args.txt: the args of each kg
// container of Kilo's manifests (and of the seed's DaemonSet), by block name.
func manifestArgs(t *testing.T) (names []string, args map[string][]string) {
	t.Helper()
	f, err := os.Open("testdata/kilo_manifest_args.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	args = map[string][]string{}
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "== "):
			cur = strings.TrimPrefix(line, "== ")
			names = append(names, cur)
			args[cur] = []string{}
		default:
			args[cur] = append(args[cur], line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names, args
}

// kubeletEnv expands $(VAR) as the kubelet does, with the values the
// manifests' env would give on one node.
var kubeletEnv = strings.NewReplacer("$(NODE_NAME)", "node-beijing", "$(NODE_IP)", "10.0.1.10")

func TestKiloManifestArgsAreAccepted(t *testing.T) {
	names, all := manifestArgs(t)
	if len(names) < 16 {
		t.Fatalf("testdata holds %d containers, want Kilo's 16 and the seed's", len(names))
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			var args []string
			for _, a := range all[name] {
				args = append(args, kubeletEnv.Replace(a))
			}
			if len(args) > 0 && args[0] == "webhook" {
				if _, err := parseWebhookFlags(args[1:]); err != nil {
					t.Fatalf("kg %s: %v", strings.Join(args, " "), err)
				}
				return
			}
			o, err := parseFlags(args)
			if err != nil {
				t.Fatalf("kg %s: %v", strings.Join(args, " "), err)
			}
			if _, err := o.topologyOptions(); err != nil {
				t.Errorf("kg %s: %v", strings.Join(args, " "), err)
			}
			if _, err := newLogger(&bytes.Buffer{}, o.logLevel); err != nil {
				t.Errorf("kg %s: %v", strings.Join(args, " "), err)
			}
			if o.hostname != "node-beijing" || o.kubeconfig != "/etc/kubernetes/kubeconfig" {
				t.Errorf("hostname %q, kubeconfig %q: want the manifest's", o.hostname, o.kubeconfig)
			}
		})
	}
}

func TestKiloFlagsTakeEffect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, o options)
	}{
		{
			name: "internal CIDRs repeated and comma-separated",
			args: []string{"--internal-cidr=10.0.1.10/32", "--internal-cidr=fd00:1::/64, 192.168.0.0/16"},
			check: func(t *testing.T, o options) {
				got, _ := o.internalCIDRs.prefixes("internal-cidr")
				want := []netip.Prefix{netip.MustParsePrefix("10.0.1.10/32"), netip.MustParsePrefix("fd00:1::/64"), netip.MustParsePrefix("192.168.0.0/16")}
				if diff := cmp.Diff(want, got, prefixCmp); diff != "" {
					t.Errorf("internal CIDRs (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "Kilo's CNI and interface flags",
			args: []string{"--cni=false", "--cni-path=/etc/cni/net.d/20-kilo.conflist", "--create-interface=false", "--master=https://10.0.0.1:6443", "--backend=kubernetes", "--topology-label=example.com/zone", "--mtu=1380"},
			check: func(t *testing.T, o options) {
				if o.cni || o.cniPath != "/etc/cni/net.d/20-kilo.conflist" || o.createIface || o.master != "https://10.0.0.1:6443" || o.topologyLabel != "example.com/zone" || o.mtu != "1380" {
					t.Errorf("options %+v do not carry the flags", o)
				}
			},
		},
		{
			name: "forward rules, private endpoint and graph are off unless asked",
			args: nil,
			check: func(t *testing.T, o options) {
				if o.iptablesForwardRules || o.prioritisePrivate || o.serveGraph || !o.cni || !o.createIface || o.listen != ":1107" {
					t.Errorf("defaults: forward rules %v, private %v, graph %v, cni %v, create %v, listen %q",
						o.iptablesForwardRules, o.prioritisePrivate, o.serveGraph, o.cni, o.createIface, o.listen)
				}
			},
		},
		{
			name: "forward rules, private endpoint and graph on",
			args: []string{"--iptables-forward-rules", "--prioritise-private-addresses=true", "--serve-graph", "--listen=10.0.1.10:1107"},
			check: func(t *testing.T, o options) {
				if !o.iptablesForwardRules || !o.prioritisePrivate || !o.serveGraph || o.listen != "10.0.1.10:1107" {
					t.Errorf("options %+v do not carry the flags", o)
				}
			},
		},
		{
			name: "a compatibility mode is noted once",
			args: []string{"--compatibility=flannel"},
			check: func(t *testing.T, o options) {
				if len(o.notes) != 1 || !strings.Contains(o.notes[0], "--compatibility=flannel") {
					t.Errorf("notes %q, want one about --compatibility=flannel", o.notes)
				}
			},
		},
		{
			name: "the manifests' own flags are not noted",
			args: []string{"--cni=false", "--local=false", "--internal-cidr=10.0.1.10/32", "--log-level=all", "--create-interface=false"},
			check: func(t *testing.T, o options) {
				if len(o.notes) != 0 {
					t.Errorf("notes %q, want none", o.notes)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(append([]string{"--hostname=n1"}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

func TestBadFlagsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, arg, wantErr string
	}{
		{"WireGuard implementation", "--wireguard=boringtun", "boringtun"},
		{"backend", "--backend=etcd", `--backend "etcd": the only backend is kubernetes`},
		{"compatibility", "--compatibility=calico", `--compatibility "calico": use flannel or cilium`},
		{"port", "--port=70000", "--port 70000"},
		{"internal CIDR", "--internal-cidr=10.0.1.10", `--internal-cidr "10.0.1.10"`},
		{"positional argument", "serve", `unexpected argument "serve"`},
		{"leader election", "--leader-election=raft", `--leader-election "raft": want location or node-leases`},
		{"leader election of the readers", "--leader-election=auto", `--leader-election "auto": want location or node-leases`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags([]string{"--hostname=n1", tc.arg})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("kg %s: error %v, want one containing %q", tc.arg, err, tc.wantErr)
			}
		})
	}
}

func TestLeaderElectionFlag(t *testing.T) {
	for arg, want := range map[string]string{"": defaultLeaderElection, "--leader-election=location": "location", "--leader-election=node-leases": "node-leases"} {
		args := []string{"--hostname=n1"}
		if arg != "" {
			args = append(args, arg)
		}
		o, err := parseFlags(args)
		if err != nil || o.leaderElection != want {
			t.Errorf("kg %v: leader election %q, %v; want %q", args, o.leaderElection, err, want)
		}
	}
}

func TestVersionIsAFlagAndACommand(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		if _, err := parseFlags(args); err != errVersion {
			t.Errorf("kg %s: %v, want errVersion", strings.Join(args, " "), err)
		}
	}
}

func TestLogLevelsOfKilo(t *testing.T) {
	for _, tc := range []struct {
		level               string
		debug, info, errors bool
	}{
		{"all", true, true, true},
		{"debug", true, true, true},
		{"info", false, true, true},
		{"warn", false, false, true},
		{"error", false, false, true},
		{"none", false, false, false},
	} {
		t.Run(tc.level, func(t *testing.T) {
			log, err := newLogger(&bytes.Buffer{}, tc.level)
			if err != nil {
				t.Fatal(err)
			}
			h := log.Handler()
			got := [3]bool{h.Enabled(t.Context(), -4), h.Enabled(t.Context(), 0), h.Enabled(t.Context(), 8)}
			if want := [3]bool{tc.debug, tc.info, tc.errors}; got != want {
				t.Errorf("debug, info, error enabled = %v, want %v", got, want)
			}
		})
	}
	if _, err := newLogger(&bytes.Buffer{}, "trace"); err == nil {
		t.Error("--log-level=trace accepted")
	}
}

func TestKlogGoesToTheSlogLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "info")
	if err != nil {
		t.Fatal(err)
	}
	routeKlog(log)
	t.Cleanup(func() { klog.ClearLogger() })
	klog.InfoS("watch restarted", "resource", "nodes")
	klog.ErrorS(nil, "lost the API server")
	klog.Flush()
	out := buf.String()
	for _, want := range []string{`level=INFO msg="watch restarted" component=client-go resource=nodes`, `level=ERROR msg="lost the API server" component=client-go`} {
		if !strings.Contains(out, want) {
			t.Errorf("slog output lacks %q:\n%s", want, out)
		}
	}
}
