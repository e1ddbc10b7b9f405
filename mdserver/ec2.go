package mdserver

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// EC2 versions served, oldest first. Each maps to a feature level: 0 is
// the 2009-04-04 tree, 1 adds network/interfaces/macs (2016-09-02), 2
// adds placement/region (2019-10-01).
var ec2VersionList = []string{"2009-04-04", "2016-09-02", "2018-09-24", "2019-10-01", "2021-03-23", "latest"}

const ec2Levels = 3

func ec2Level(v string) int {
	switch v {
	case "2009-04-04":
		return 0
	case "2016-09-02", "2018-09-24":
		return 1
	case "2019-10-01", "2021-03-23", "latest":
		return 2
	}
	return -1
}

var ec2VersionsBody = []byte(strings.Join(ec2VersionList, "\n"))

// nic is one interface as the EC2 tree shows it.
type nic struct {
	mac   string
	v4    []netip.Prefix
	v6    []netip.Prefix
	index int
}

// nics returns the spec's ethernets that have a MAC address, in the order
// of their configuration IDs.
func nics(inst *spec.Instance) []nic {
	n := inst.Spec.Network
	if n == nil {
		return nil
	}
	var out []nic
	for _, id := range sortedKeys(n.Ethernets) {
		e := n.Ethernets[id]
		mac := e.MACAddress
		if e.Match != nil && e.Match.MACAddress != "" {
			mac = e.Match.MACAddress
		}
		hw, err := net.ParseMAC(mac)
		if err != nil {
			continue
		}
		c := nic{mac: hw.String(), index: len(out)}
		for _, a := range e.Addresses {
			if p, err := netip.ParsePrefix(a); err == nil {
				if p.Addr().Is4() {
					c.v4 = append(c.v4, p)
				} else {
					c.v6 = append(c.v6, p)
				}
			}
		}
		out = append(out, c)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// localIPv4 is the spec's first static IPv4 address, else the first IPv4
// address the instance is identified by.
func localIPv4(rec *registry.Record, ns []nic) string {
	for _, c := range ns {
		if len(c.v4) > 0 {
			return c.v4[0].Addr().String()
		}
	}
	if n := rec.Instance.Spec.Network; n != nil {
		for _, id := range sortedKeys(n.Ethernets) {
			for _, a := range n.Ethernets[id].Addresses {
				if p, err := netip.ParsePrefix(a); err == nil && p.Addr().Is4() {
					return p.Addr().String()
				}
			}
		}
	}
	for _, a := range rec.Addresses {
		if a.Is4() {
			return a.String()
		}
	}
	return ""
}

func shortHash(s string, n int) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])[:n]
}

// keyNames names the public keys: the key's comment when it is a plain
// unique word, else key-N.
func keyNames(keys []string) []string {
	names := make([]string, len(keys))
	seen := map[string]bool{}
	for i, k := range keys {
		f := strings.Fields(k)
		name := ""
		if len(f) >= 3 && !strings.ContainsAny(f[2], "=/") {
			name = f[2]
		}
		if name == "" || seen[name] {
			name = "key-" + strconv.Itoa(i)
		}
		seen[name] = true
		names[i] = name
	}
	return names
}

// treeBuilder collects leaves; listings are derived so that every listed
// name is fetchable and every directory ends in "/".
type treeBuilder struct {
	m        map[string][]byte
	children map[string][]string
	override map[string][]byte
	// listings interns listing bodies, so that the levels of one instance
	// share the listings they have in common.
	listings map[string][]byte
}

func (t *treeBuilder) leaf(p string, v []byte) {
	t.m[p] = v
	for {
		i := strings.LastIndexByte(strings.TrimSuffix(p, "/"), '/')
		dir, name := "", p
		if i >= 0 {
			dir, name = p[:i+1], p[i+1:]
		}
		if slices.Contains(t.children[dir], name) {
			return
		}
		t.children[dir] = append(t.children[dir], name)
		if dir == "" {
			return
		}
		p = dir
	}
}

func (t *treeBuilder) build() map[string][]byte {
	for dir, names := range t.children {
		if o, ok := t.override[dir]; ok {
			t.m[dir] = o
			continue
		}
		slices.Sort(names)
		body := strings.Join(names, "\n")
		b, ok := t.listings[body]
		if !ok {
			b = []byte(body)
			t.listings[body] = b
		}
		t.m[dir] = b
	}
	return t.m
}

// ec2Leaf is a file of the EC2 tree and the lowest level that has it.
type ec2Leaf struct {
	level int
	path  string
	body  []byte
}

// ec2Root is the version directory: its entries without "/" (as EC2
// lists them); user-data is always there (cloud-init user data is never
// empty).
var ec2Root = []byte("dynamic\nmeta-data\nuser-data")

// ec2Trees renders the EC2 tree of every feature level (without
// user-data, which depends on the request for Ignition instances). The
// leaves are computed once and their bodies shared by the levels: a first
// fetch renders all of them, on the request path of a booting VM.
func ec2Trees(rec *registry.Record) [ec2Levels]map[string][]byte {
	inst := rec.Instance
	s := &inst.Spec
	ms := s.MetadataServerSettings()
	var leaves []ec2Leaf
	leaf := func(level int, p, v string) { leaves = append(leaves, ec2Leaf{level, p, []byte(v)}) }
	override := map[string][]byte{}
	md := "meta-data/"
	host := s.Hostname
	if s.FQDN != "" {
		host = s.FQDN
	}
	leaf(0, md+"ami-id", "ami-vminit")
	leaf(0, md+"ami-launch-index", "0")
	leaf(0, md+"ami-manifest-path", "(unknown)")
	leaf(0, md+"block-device-mapping/ami", "/dev/vda")
	leaf(0, md+"block-device-mapping/root", "/dev/vda")
	leaf(0, md+"hostname", host)
	leaf(0, md+"local-hostname", host)
	leaf(0, md+"instance-action", "none")
	leaf(0, md+"instance-id", s.InstanceID)
	leaf(0, md+"instance-type", ms.InstanceType)
	leaf(0, md+"placement/availability-zone", ms.AvailabilityZone)
	leaf(2, md+"placement/region", ms.Region)
	leaf(0, md+"reservation-id", "r-"+shortHash(rec.Name, 17))
	leaf(0, md+"security-groups", "default")
	ns := nics(inst)
	ip := localIPv4(rec, ns)
	if ip != "" {
		leaf(0, md+"local-ipv4", ip)
	}
	if len(ns) > 0 {
		leaf(0, md+"mac", ns[0].mac)
	}
	for _, c := range ns {
		d := md + "network/interfaces/macs/" + c.mac + "/"
		leaf(1, d+"device-number", strconv.Itoa(c.index))
		leaf(1, d+"interface-id", "eni-"+shortHash(rec.Name+c.mac, 17))
		leaf(1, d+"mac", c.mac)
		var v4 []string
		for _, p := range c.v4 {
			v4 = append(v4, p.Addr().String())
		}
		if len(v4) == 0 && c.index == 0 && ip != "" {
			v4 = []string{ip}
		}
		if len(v4) > 0 {
			leaf(1, d+"local-ipv4s", strings.Join(v4, "\n"))
		}
		if len(c.v4) > 0 {
			leaf(1, d+"subnet-ipv4-cidr-block", c.v4[0].Masked().String())
		}
		if len(c.v6) > 0 {
			var v6 []string
			for _, p := range c.v6 {
				v6 = append(v6, p.Addr().String())
			}
			leaf(1, d+"ipv6s", strings.Join(v6, "\n"))
			leaf(1, d+"subnet-ipv6-cidr-blocks", c.v6[0].Masked().String())
		}
	}
	if keys := trimmedKeys(s.SSHAuthorizedKeys); len(keys) > 0 {
		names := keyNames(keys)
		var lines []string
		for i, k := range keys {
			leaf(0, md+"public-keys/"+strconv.Itoa(i)+"/openssh-key", k)
			lines = append(lines, strconv.Itoa(i)+"="+names[i])
		}
		override[md+"public-keys/"] = []byte(strings.Join(lines, "\n"))
	}
	doc, _ := json.MarshalIndent(map[string]any{
		"accountId":        "000000000000",
		"architecture":     "x86_64",
		"availabilityZone": ms.AvailabilityZone,
		"imageId":          "ami-vminit",
		"instanceId":       s.InstanceID,
		"instanceType":     ms.InstanceType,
		"privateIp":        nilIfEmpty(ip),
		"region":           ms.Region,
		"version":          "2017-09-30",
	}, "", "  ")
	leaves = append(leaves, ec2Leaf{0, "dynamic/instance-identity/document", doc})

	var trees [ec2Levels]map[string][]byte
	listings := map[string][]byte{}
	for level := range ec2Levels {
		t := &treeBuilder{m: map[string][]byte{}, children: map[string][]string{}, override: override, listings: listings}
		for _, l := range leaves {
			if l.level <= level {
				t.leaf(l.path, l.body)
			}
		}
		t.build()
		t.m[""] = ec2Root
		trees[level] = t.m
	}
	return trees
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func trimmedKeys(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

func (h *Handler) ec2Versions(w http.ResponseWriter, r *http.Request) {
	serveBytes(w, textPlain, ec2VersionsBody)
}

func (h *Handler) ec2(w http.ResponseWriter, r *http.Request) {
	ver, p, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/") // /{ver}/{path...}; ServeMux cleaned it
	level := ec2Level(ver)
	if level < 0 {
		emptyStatus(w, http.StatusNotFound)
		return
	}
	rec := recordOf(w)
	if p == "user-data" {
		b, ctype, err := h.userData(r, rec, "ec2")
		if h.failed(w, rec, err) {
			return
		}
		if len(b) == 0 {
			emptyStatus(w, http.StatusNotFound)
			return
		}
		serveBytes(w, ctype, b)
		return
	}
	tree := h.ec2Tree(rec)[level]
	b, ok := tree[p]
	if !ok && !strings.HasSuffix(p, "/") {
		b, ok = tree[p+"/"]
	}
	if !ok || strings.Contains(p, "//") {
		emptyStatus(w, http.StatusNotFound)
		return
	}
	ctype := textPlain
	if strings.HasSuffix(p, "/document") {
		ctype = "application/json"
	}
	serveBytes(w, ctype, b)
}

// failed answers 500 for a rendering error (logged, never sent).
func (h *Handler) failed(w http.ResponseWriter, rec *registry.Record, err error) bool {
	if err == nil {
		return false
	}
	h.log.Error("rendering failed", "instance", rec.Name, "error", err)
	emptyStatus(w, http.StatusInternalServerError)
	return true
}

// IMDSv2 tokens are stateless: base64url(expiry (8 bytes, big-endian Unix
// seconds) || HMAC-SHA256(key, name 0x00 expiry)[:24]). A token names its
// instance through the MAC, so one minted for A does not verify for B.
type tokenSigner struct{ key []byte }

func newTokenSigner(key []byte) tokenSigner {
	if len(key) == 0 {
		key = make([]byte, 32)
		rand.Read(key)
	}
	return tokenSigner{key: key}
}

func (t tokenSigner) sum(name string, exp []byte) []byte {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(name))
	m.Write([]byte{0})
	m.Write(exp)
	return m.Sum(nil)[:24]
}

func (t tokenSigner) mint(name string, expiry time.Time) string {
	var b [32]byte
	binary.BigEndian.PutUint64(b[:8], uint64(expiry.Unix()))
	copy(b[8:], t.sum(name, b[:8]))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (t tokenSigner) valid(tok, name string, now time.Time) bool {
	var b [32]byte
	if base64.RawURLEncoding.DecodedLen(len(tok)) != len(b) {
		return false
	}
	if _, err := base64.RawURLEncoding.Decode(b[:], []byte(tok)); err != nil {
		return false
	}
	if !hmac.Equal(b[8:], t.sum(name, b[:8])) {
		return false
	}
	return now.Unix() < int64(binary.BigEndian.Uint64(b[:8]))
}

// ec2Authorized applies IMDSv2: a token, when sent, must be valid for this
// instance (401 otherwise, as on EC2); without one, the request passes
// unless the instance has imdsv2: required.
func (h *Handler) ec2Authorized(r *http.Request, rec *registry.Record) bool {
	if tok := r.Header.Get(HeaderToken); tok != "" {
		return h.tokens.valid(tok, rec.Name, h.opts.Now())
	}
	ms := rec.Instance.Spec.MetadataServer
	return ms == nil || ms.IMDSv2 != "required"
}

// MaxTokenTTL is the longest IMDSv2 token lifetime, in seconds (6 hours).
const MaxTokenTTL = 21600

func (h *Handler) ec2Token(w http.ResponseWriter, r *http.Request) {
	rec := recordOf(w)
	// A token request that went through a proxy is refused, as on EC2: an
	// SSRF through an open proxy must not obtain a token.
	if len(r.Header.Values("X-Forwarded-For")) > 0 {
		emptyStatus(w, http.StatusForbidden)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(HeaderTokenTTL))
	if err != nil || ttl < 1 || ttl > MaxTokenTTL {
		emptyStatus(w, http.StatusBadRequest)
		return
	}
	ms := rec.Instance.Spec.MetadataServerSettings()
	if err := setHopLimit(r, ms.TokenHopLimit); err != nil {
		// Fail closed: a token whose packets could travel further than
		// configured is not issued.
		h.log.Error("IMDSv2: cannot set the hop limit on the connection; serve with mdserver.NewServer or ConnContext", "instance", rec.Name, "error", err)
		emptyStatus(w, http.StatusInternalServerError)
		return
	}
	tok := h.tokens.mint(rec.Name, h.opts.Now().Add(time.Duration(ttl)*time.Second))
	w.Header().Set(HeaderTokenTTL, strconv.Itoa(ttl))
	serveBytes(w, textPlain, []byte(tok))
}
