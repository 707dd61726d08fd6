//go:build linux

package wireguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"

	"github.com/kilofed/kilofed/mesh/link"

	"github.com/kilofed/kilofed/mesh/topology/wgconf"
)

// Open creates or adopts the WireGuard interface opts.Name and returns a
// Device that configures it through wgctrl. In ModeKernel it creates a
// link of type wireguard (or adopts an existing one); in ModeUserspace it
// runs wireguard-go inside this process, serving the standard control
// socket /var/run/wireguard/NAME.sock that wgctrl and wg(8) use; ModeAuto
// picks the kernel when it can create the link type, else userspace.
// Addresses and link state are not set here: see package link.
func Open(ctx context.Context, opts OpenOptions) (Device, error) {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if len(opts.Name) > 15 {
		return nil, fmt.Errorf("open WireGuard interface %q: name longer than 15 bytes", opts.Name)
	}
	mode, err := ParseMode(string(opts.Mode))
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("interface", opts.Name)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d := &wgDevice{name: opts.Name, log: log, now: time.Now}
	if !opts.Existing && (mode == ModeAuto || mode == ModeKernel) {
		err := link.RunInNetNS(opts.NetNS, func() error { return createKernelLink(opts.Name, opts.MTU) })
		switch {
		case err == nil:
			mode = ModeKernel
		case errors.Is(err, ErrKernelUnsupported) && mode == ModeAuto:
			log.Info("kernel WireGuard not available, using embedded wireguard-go")
			mode = ModeUserspace
		default:
			return nil, err
		}
	}
	if !opts.Existing && mode == ModeUserspace {
		u, err := openUserspace(opts, log)
		if err != nil {
			return nil, err
		}
		d.user = u
	}
	// wgctrl's kernel client talks generic netlink in the namespace where
	// it is created; its userspace client dials the control socket.
	err = link.RunInNetNS(opts.NetNS, func() error {
		c, err := wgctrl.New()
		d.client = c
		return err
	})
	if err == nil {
		_, err = d.client.Device(opts.Name)
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("open WireGuard interface %s through wgctrl: %w", opts.Name, err)
	}
	if opts.Existing {
		mode = "existing"
	}
	log.Info("WireGuard interface ready", "mode", mode)
	return d, nil
}

// wgDevice configures one interface through wgctrl; user is set for an
// embedded wireguard-go device.
type wgDevice struct {
	mu     sync.Mutex
	name   string
	log    *slog.Logger
	now    func() time.Time
	client *wgctrl.Client
	user   *userspace
	closed bool
}

func (d *wgDevice) Set(ctx context.Context, cfg wgconf.Config) error {
	if err := validate(cfg); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	cur, err := d.client.Device(d.name)
	if err != nil {
		return fmt.Errorf("read WireGuard interface %s: %w", d.name, err)
	}
	merged := MergeLearned(cfg, stateFrom(cur), d.now())
	c, ok := changes(merged, cur)
	if !ok {
		return nil
	}
	if err := d.client.ConfigureDevice(d.name, c); err != nil {
		return fmt.Errorf("configure WireGuard interface %s: %w", d.name, err)
	}
	d.log.Debug("WireGuard interface configured", "changes", formatChanges(c))
	return nil
}

func (d *wgDevice) Show(ctx context.Context) (State, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return State{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return State{}, err
	}
	cur, err := d.client.Device(d.name)
	if err != nil {
		return State{}, fmt.Errorf("read WireGuard interface %s: %w", d.name, err)
	}
	return stateFrom(cur), nil
}

func (d *wgDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	if d.client != nil {
		errs = append(errs, d.client.Close())
	}
	if d.user != nil {
		errs = append(errs, d.user.close())
	}
	return errors.Join(errs...)
}
