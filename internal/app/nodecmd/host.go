package nodecmd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/vminit/vminit/mdserver/intercept"
)

// hostPath is the host data path's installation: vminit's nftables table
// in the node's network namespace, the agent's own (it runs on the host
// network).
type hostPath struct {
	table    *intercept.Table
	interval time.Duration
	log      *slog.Logger
	missing  bool // the last check found the table gone (logged once)
}

// ownNetNS is the caller's network namespace for intercept.
const ownNetNS = 0

func (h *hostPath) describe() string {
	return fmt.Sprintf("nftables table ip %s in the node's network namespace, redirecting to %s", intercept.TableName, h.table.Agent())
}

func (h *hostPath) install(context.Context) error {
	if err := h.table.Install(ownNetNS); err != nil {
		return fmt.Errorf("--intercept host: %w", err)
	}
	h.log.Info("vminit-node: installed the interception", "table", h.table.String())
	return nil
}

// watch puts the table back when something else deleted it (an `nft
// flush ruleset`, a firewall's reload), checking at every interval.
func (h *hostPath) watch(ctx context.Context) {
	every(ctx, h.interval, func() {
		err := h.table.Check(ownNetNS)
		if err == nil {
			h.missing = false
			return
		}
		if !h.missing {
			h.log.Warn("vminit-node: the interception table changed under it; installing it again", "err", err)
			h.missing = true
		}
		if err := h.table.Install(ownNetNS); err != nil {
			h.log.Error("vminit-node: cannot install the interception table again", "err", err)
		}
	})
}

func (h *hostPath) remove() error {
	if err := intercept.Remove(ownNetNS); err != nil {
		return err
	}
	h.log.Info("vminit-node: removed the interception", "table", "ip "+intercept.TableName)
	return nil
}
