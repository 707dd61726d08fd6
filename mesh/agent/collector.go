package agent

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kilofed/kilofed/mesh/wireguard"
)

// DeviceCollector exports the WireGuard device's live counters at scrape
// time: per-peer latest handshake and bytes, and interface totals under the
// names the Chinese seed's dashboards use (wireguard_receive_bytes_total,
// wireguard_transmit_bytes_total).
type DeviceCollector struct {
	dev   wireguard.Device
	names func() map[string]string // public key -> node or Peer name

	handshake, rx, tx, rxTotal, txTotal *prometheus.Desc
}

// NewDeviceCollector returns a collector for dev; names maps public keys to
// human names for the peer label and may be nil.
func NewDeviceCollector(dev wireguard.Device, names func() map[string]string) *DeviceCollector {
	labels := []string{"interface", "peer", "public_key"}
	return &DeviceCollector{
		dev:       dev,
		names:     names,
		handshake: prometheus.NewDesc("kilo_peer_latest_handshake_seconds", "Unix time of the latest handshake with a peer, 0 if none.", labels, nil),
		rx:        prometheus.NewDesc("kilo_peer_receive_bytes_total", "Bytes received from a peer.", labels, nil),
		tx:        prometheus.NewDesc("kilo_peer_transmit_bytes_total", "Bytes sent to a peer.", labels, nil),
		rxTotal:   prometheus.NewDesc("wireguard_receive_bytes_total", "Bytes received on the WireGuard interface.", []string{"interface"}, nil),
		txTotal:   prometheus.NewDesc("wireguard_transmit_bytes_total", "Bytes sent on the WireGuard interface.", []string{"interface"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *DeviceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.handshake, c.rx, c.tx, c.rxTotal, c.txTotal} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *DeviceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.dev.Show(ctx)
	if err != nil {
		return
	}
	var names map[string]string
	if c.names != nil {
		names = c.names()
	}
	var rx, tx int64
	for _, p := range st.Peers {
		key := p.PublicKey.String()
		hs := 0.0
		if !p.LastHandshake.IsZero() {
			hs = float64(p.LastHandshake.Unix())
		}
		ch <- prometheus.MustNewConstMetric(c.handshake, prometheus.GaugeValue, hs, st.Name, names[key], key)
		ch <- prometheus.MustNewConstMetric(c.rx, prometheus.CounterValue, float64(p.ReceiveBytes), st.Name, names[key], key)
		ch <- prometheus.MustNewConstMetric(c.tx, prometheus.CounterValue, float64(p.TransmitBytes), st.Name, names[key], key)
		rx += p.ReceiveBytes
		tx += p.TransmitBytes
	}
	ch <- prometheus.MustNewConstMetric(c.rxTotal, prometheus.CounterValue, float64(rx), st.Name)
	ch <- prometheus.MustNewConstMetric(c.txTotal, prometheus.CounterValue, float64(tx), st.Name)
}
