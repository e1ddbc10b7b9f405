package nodecmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/vminit/vminit/mdserver/intercept"
)

// hostPath is the host data path's installation: vminit's nftables
// tables in the node's network namespace, the agent's own (it runs on
// the host network): ip vminit, and ip6 vminit on a node with an IPv6
// agent address.
type hostPath struct {
	tables   []*intercept.Table
	interval time.Duration
	log      *slog.Logger
	missing  bool // the last check found a table gone (logged once)
}

// ownNetNS is the caller's network namespace for intercept.
const ownNetNS = 0

func (h *hostPath) describe() string {
	var what []string
	for _, t := range h.tables {
		what = append(what, fmt.Sprintf("%s redirecting to %s", t.Name(), t.Agent()))
	}
	return "nftables tables in the node's network namespace: " + strings.Join(what, "; ")
}

// install writes each table. A kernel without IPv6 nf_tables is a node
// without IPv6 to intercept: the agent says so and goes on with IPv4.
func (h *hostPath) install(context.Context) error {
	kept := h.tables[:0]
	for _, t := range h.tables {
		err := t.Install(ownNetNS)
		switch {
		case err != nil && t.IPv6() && errors.Is(err, syscall.EAFNOSUPPORT):
			h.log.Warn("vminit-node: the node cannot intercept IPv6; fd00:ec2::254 is not intercepted, IPv4 only", "err", err)
			continue
		case err != nil:
			return fmt.Errorf("--intercept host: %w", err)
		}
		h.log.Info("vminit-node: installed the interception", "table", t.String())
		kept = append(kept, t)
	}
	h.tables = kept
	return nil
}

// watch puts a table back when something else deleted it (an `nft
// flush ruleset`, a firewall's reload), checking at every interval.
func (h *hostPath) watch(ctx context.Context) {
	every(ctx, h.interval, func() {
		var errs []error
		for _, t := range h.tables {
			if err := t.Check(ownNetNS); err != nil {
				errs = append(errs, err)
				if err := t.Install(ownNetNS); err != nil {
					h.log.Error("vminit-node: cannot install the interception table again", "table", t.Name(), "err", err)
				}
			}
		}
		if err := errors.Join(errs...); err == nil {
			h.missing = false
		} else if !h.missing {
			h.log.Warn("vminit-node: the interception table changed under it; installing it again", "err", err)
			h.missing = true
		}
	})
}

func (h *hostPath) remove() error {
	if err := intercept.Remove(ownNetNS); err != nil {
		return err
	}
	h.log.Info("vminit-node: removed the interception", "tables", "ip "+intercept.TableName+", ip6 "+intercept.TableName)
	return nil
}
