package etcdstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vminit/vminit/mdserver/firstboot"
)

// TestFirstBootEventsOfTwoReplicas: guests post their events to two
// replicas in turn (as a load balancer spreads them), with no fault at
// all. Every event either accepted is in etcd's status and in both
// replicas' views: the stored status is the union of both, written by
// compare-and-swap, not whichever wrote last.
func TestFirstBootEventsOfTwoReplicas(t *testing.T) {
	e := startEtcd(t)
	ctx := context.Background()
	a, _ := open(t, e, "")
	b, _ := open(t, e, "")
	const instances, events = 100, 8
	uids := map[string]string{}
	for i := range instances {
		name := fmt.Sprintf("vm-%03d", i)
		rec, err := a.Put(ctx, []byte(doc(name, fmt.Sprintf("10.6.%d.%d", i/200, i%200+1), name)))
		if err != nil {
			t.Fatal(err)
		}
		uids[name] = rec.UID
	}
	eventually(t, "b to serve every instance", func() bool { return b.Snapshot().Len() == instances })
	errs := make(chan error, 8)
	ta, tb := follow(t, a, errs), follow(t, b, errs)
	replicas := []*firstboot.Tracker{ta, tb}
	for name, uid := range uids {
		ta.Fetch(name, uid, firstboot.AgentCloudInit, "nocloud", "/meta-data")
	}
	for j := range events {
		for name, uid := range uids {
			ev := firstboot.Event{Kind: firstboot.KindStart, Name: fmt.Sprintf("init-network/m%d", j)}
			if err := replicas[j%2].Record(name, uid, firstboot.AgentCloudInit, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	// has reports whether st holds every event posted.
	has := func(st firstboot.Status) bool {
		seen := map[string]bool{}
		for _, ev := range st.Events {
			seen[ev.Name] = true
		}
		for j := range events {
			if !seen[fmt.Sprintf("init-network/m%d", j)] {
				return false
			}
		}
		return true
	}
	cli := e.Client()
	missing := func() []string {
		var out []string
		got, err := cli.Get(ctx, "/vminit/instances.boot/", clientv3.WithPrefix())
		if err != nil {
			return []string{err.Error()}
		}
		stored := map[string]firstboot.Status{}
		for _, kv := range got.Kvs {
			st, err := decodeBoot(kv.Value)
			if err != nil {
				t.Fatalf("%s: %v", kv.Key, err)
			}
			stored[st.Name] = st
		}
		for name, uid := range uids {
			for where, st := range map[string]firstboot.Status{"etcd": stored[name], "a": ta.Status(name, uid, ""), "b": tb.Status(name, uid, "")} {
				if !has(st) {
					out = append(out, where+":"+name)
				}
			}
		}
		return out
	}
	eventually(t, "every event in etcd and in both replicas", func() bool { return len(missing()) == 0 })
	if m := missing(); len(m) > 0 {
		slices.Sort(m)
		t.Errorf("lacking events: %s", strings.Join(m, " "))
	}
	select {
	case err := <-errs:
		t.Errorf("Persist or FollowBoots: %v", err)
	default:
	}
}
