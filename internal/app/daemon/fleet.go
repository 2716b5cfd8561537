package daemon

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/fleet"
	"github.com/tiered/tiered/fetchcache/groupadmin"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/remotetier/objstore"
)

// selfAddr is the advertised Kafka address of this replica: kafka.advertised_addr, else
// kafka.addr.
func (b *base) selfAddr() string {
	if a := b.cfg.Kafka.AdvertisedAddr; a != "" {
		return a
	}
	return b.cfg.Kafka.Addr
}

// newFleet is the fetch fleet of fetch.peers: alone (no lease, every group coordinated
// here) without peers, else leases in bucket (which must accept writes to groups/).
// held lists the groups the coordinator keeps state for; onLose is called for each of
// them that moved to another replica.
func (b *base) newFleet(bucket objstore.Bucket, held func() []string, onLose func(group string)) (*fleet.Fleet, error) {
	f, err := fleet.New(fleet.Options{
		Bucket:     bucket,
		Self:       b.selfAddr(),
		Peers:      b.cfg.Fetch.Peers,
		Lease:      b.cfg.Fetch.PeerLease,
		Logger:     b.log.With("component", "fleet"),
		Registerer: b.reg,
		OnLose:     onLose,
		Held:       held,
	})
	if err != nil {
		return nil, fmt.Errorf("fetch fleet: %w", err)
	}
	return f, nil
}

// fleetNodeID is the Kafka node id of this replica: in a fleet, a hash of its address
// (fleet.NodeID; in DNS mode the address the peers' name gives for it, resolved here), the
// same on every replica; alone, 0.
func fleetNodeID(ctx context.Context, f *fleet.Fleet) (int32, error) {
	if f.Alone() {
		return 0, nil
	}
	if err := f.Resolve(ctx); err != nil {
		return 0, fmt.Errorf("fetch fleet: %w", err)
	}
	return f.Self().NodeID, nil
}

// fleetBrokers lists the fleet's live replicas as Kafka brokers for Metadata (nil alone):
// clients such as kafkajs reach the coordinator FindCoordinator names only if Metadata
// listed it.
func fleetBrokers(f *fleet.Fleet) func() []kafkasrv.Broker {
	if f.Alone() {
		return nil
	}
	return func() []kafkasrv.Broker {
		live, _ := f.Live()
		out := make([]kafkasrv.Broker, 0, len(live))
		for _, m := range live {
			out = append(out, kafkasrv.Broker{NodeID: m.NodeID, Host: m.Host(), Port: m.Port()})
		}
		return out
	}
}

// startFleet names the HTTP URL in the lease (the advertised host, the bound HTTP port),
// writes the first lease and reads the peers'. A lease that cannot be written (a bucket
// that refuses writes) leaves the replica serving reads with no group coordinated here:
// the group APIs answer COORDINATOR_NOT_AVAILABLE (or name a live peer).
func (b *base) startFleet(ctx context.Context, f *fleet.Fleet, httpAddr string) {
	if f.Alone() {
		return
	}
	host, _, _ := net.SplitHostPort(f.Self().Addr)
	_, port, _ := net.SplitHostPort(httpAddr)
	scheme := "http"
	if b.cfg.HTTP.TLS.CertFile != "" {
		scheme = "https"
	}
	f.SetHTTPURL(scheme + "://" + net.JoinHostPort(host, port))
	if err := f.Start(ctx); err != nil {
		b.log.Warn("fetch fleet lease not written: this replica coordinates no group until it is", "err", err)
		return
	}
	live, _ := f.Live()
	var addrs []string
	for _, m := range live {
		addrs = append(addrs, m.Addr)
	}
	b.log.Info("fetch fleet joined", "self", f.Self().Addr, "node_id", f.Self().NodeID, "live", strings.Join(addrs, ","),
		"lease", f.Lease(), "takeover_bound", fleet.TakeoverBound(f.Lease()))
}

// groupsHTTP is the /v1/groups administration of coordinator c over catalog cat: its
// store, its live membership and, in a fleet, the redirect to a group's coordinator (f
// nil: this process coordinates every group, as serve does).
func groupsHTTP(c *groups.Coordinator, cat fetchcache.Catalog, f *fleet.Fleet) *httpapi.Groups {
	live := groupadmin.CoordinatorLive{C: c}
	g := &httpapi.Groups{
		Admin: &groupadmin.Admin{Store: c.Store(), Catalog: cat, Live: live},
		Names: live.Names,
	}
	if f != nil {
		g.Route = func(group string) (bool, string, string, error) {
			m, ok := f.Owner(group)
			if !ok {
				return false, "", "", fleet.ErrNoCoordinator
			}
			if m.Self {
				return true, m.Addr, "", nil
			}
			return false, m.Addr, f.HTTPURL(m.Addr), nil
		}
	}
	return g
}
