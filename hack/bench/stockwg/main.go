// Command stockwg runs one end of a stock wireguard-go pair for the data
// plane benchmark (e2e/mesh BenchmarkDataPlaneTCP): the library with its
// defaults (device.DefaultMTU, conn.NewDefaultBind, no tuning), configured
// through IpcSet as wireguard-go's own device tests do. Run it inside a
// network namespace (ip netns exec); it prints "ready" once the TUN link is
// up with its address, and runs until SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
)

func main() {
	name := flag.String("name", "kflstock0", "name of the TUN link")
	private := flag.String("private-key", "", "this end's private key, hex")
	port := flag.Int("listen-port", 51901, "UDP port")
	peer := flag.String("peer-key", "", "the other end's public key, hex")
	endpoint := flag.String("endpoint", "", "the other end's UDP address (ip:port)")
	allowed := flag.String("allowed-ip", "", "the ranges routed to the other end, CIDRs separated by commas (its tunnel address first)")
	addr := flag.String("address", "", "this end's tunnel address, CIDR")
	flag.Parse()
	if err := run(*name, *private, *port, *peer, *endpoint, *allowed, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "stockwg:", err)
		os.Exit(1)
	}
}

func run(name, private string, port int, peer, endpoint, allowed, addr string) error {
	t, err := tun.CreateTUN(name, device.DefaultMTU)
	if err != nil {
		return fmt.Errorf("create TUN %s: %w", name, err)
	}
	dev := device.NewDevice(t, conn.NewDefaultBind(), device.NewLogger(device.LogLevelError, "stockwg: "))
	defer dev.Close()
	cfg := fmt.Sprintf("private_key=%s\nlisten_port=%d\npublic_key=%s\nendpoint=%s\n", private, port, peer, endpoint)
	for _, a := range strings.Split(allowed, ",") {
		cfg += "allowed_ip=" + a + "\n"
	}
	if err := dev.IpcSet(cfg); err != nil {
		return fmt.Errorf("configure the device: %w", err)
	}
	if err := dev.Up(); err != nil {
		return fmt.Errorf("bring the device up: %w", err)
	}
	for _, argv := range [][]string{{"ip", "addr", "add", addr, "dev", name}, {"ip", "link", "set", name, "up"}} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %w: %s", argv, err, out)
		}
	}
	fmt.Println("ready")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	return nil
}
