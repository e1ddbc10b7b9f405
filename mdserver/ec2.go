package mdserver

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// The EC2 dialect: the instance metadata service (IMDS) cloud-init's Ec2
// datasource and Ignition's aws platform read, with IMDSv2 session tokens.
//
//	GET  /                                       version list
//	GET  /{ver}/ , /{ver}/meta-data/…, /{ver}/user-data, /{ver}/dynamic/…
//	PUT  /latest/api/token                       IMDSv2 session token
//
// {ver} is one of cloudinit.EC2Versions. The tree is
// cloudinit.EC2MetaData's, rendered once per record revision into one map
// per feature level (user data aside: it depends on the request for
// Ignition instances).

// DialectEC2 is the EC2 dialect's name.
const DialectEC2 = spec.DialectEC2

// IMDSv2 header names.
const (
	// HeaderToken carries an IMDSv2 session token on GETs.
	HeaderToken = "X-Aws-Ec2-Metadata-Token"
	// HeaderTokenTTL is the token lifetime in seconds, asked for on the
	// PUT and echoed on its response.
	HeaderTokenTTL = "X-Aws-Ec2-Metadata-Token-Ttl-Seconds"
	// HeaderTokenHopLimit, on a token answered to a trusted proxy
	// (Options.ProxiesSetHopLimit), is the hop limit (IP TTL) the proxy
	// must give the answer on its way to the guest.
	HeaderTokenHopLimit = "X-Vminit-Token-Hop-Limit"
)

func init() {
	register(&dialect{
		name:  DialectEC2,
		title: "EC2 IMDS",
		paths: []string{"/, /{" + strings.Join(cloudinit.EC2Versions(), ",") + "}/...", "PUT /latest/api/token (IMDSv2)"},
		// cloud-init 22.4's ds-identify (ec2_identify_platform: AWS)
		// picks EC2 when the system UUID and serial both start with
		// "ec2" and are equal; Ignition's aws platform comes from the
		// kernel command line.
		readers: []DialectReader{
			{Agent: spec.AgentCloudInit, SMBIOS: func(_, name string) string {
				u := ec2SystemUUID(name)
				return "type=1,manufacturer=Amazon EC2,product=vminit,serial=" + u + ",uuid=" + u
			}},
			{Agent: spec.AgentIgnition, As: "aws"},
		},
		owns: func(path string) bool {
			v, _, _ := strings.Cut(path[1:], "/")
			return path == "/" || cloudinit.EC2Level(v) >= 0
		},
		configure: func(h *Handler, mux *http.ServeMux) guard {
			e := &ec2Server{h: h, tokens: newTokenSigner(h.opts.TokenKey)}
			mux.HandleFunc("GET /{$}", e.versions)
			mux.HandleFunc("PUT /latest/api/token", e.token)
			// Every other path is EC2's /{version}/{path...}, which serve
			// splits itself: ServeMux's wildcards cost allocations on every
			// request, and the EC2 crawl is most of a boot storm.
			mux.HandleFunc("GET /", e.serve)
			return e.authorize
		},
		crawl: func(c *crawler) {
			c.tree("/latest/meta-data/")
			c.leaf("/latest/user-data")
			c.leaf("/latest/dynamic/instance-identity/document")
		},
	})
}

// ec2SystemUUID is the SMBIOS system UUID and serial that point the
// guest of the instance called name at the EC2 dialect: "ec2" then hex
// from the name, so that the same spec gives the same identity.
func ec2SystemUUID(name string) string {
	sum := sha256.Sum256([]byte("vminit-run\x00" + name))
	h := "ec2" + hex.EncodeToString(sum[:])[:29]
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// ec2Server is the EC2 dialect of one handler.
type ec2Server struct {
	h      *Handler
	tokens tokenSigner
}

var ec2VersionsBody = []byte(strings.Join(cloudinit.EC2Versions(), "\n"))

// ec2Root is the version directory: its entries without "/" (as EC2
// lists them); user-data is always there (cloud-init user data is never
// empty).
var ec2Root = []byte("dynamic\nmeta-data\nuser-data")

// ec2Tree is the record's EC2 meta-data trees, one per feature level:
// paths relative to a version directory; listings end in "/".
var ec2Tree = newPiece(func(_ *Handler, rec *registry.Record) (ec2Levels, error) { return ec2Trees(rec), nil },
	func(t ec2Levels) int64 { return treeBytes(t[:]...) })

// ec2Levels are an instance's trees, by cloudinit.EC2Level.
type ec2Levels = [cloudinit.EC2Levels]map[string][]byte

// ec2Trees lays cloudinit.EC2MetaData out as the tree of every feature
// level: paths relative to a version directory, each directory listed
// under its path ending in "/". The files are rendered once and their
// bodies shared by the levels: a first fetch renders all of them, on the
// request path of a booting VM.
func ec2Trees(rec *registry.Record) ec2Levels {
	files := cloudinit.EC2MetaData(rec.Instance())
	override := map[string][]byte{}
	for _, f := range files {
		if strings.HasSuffix(f.Path, "/") {
			override[f.Path] = f.Data
		}
	}
	var trees ec2Levels
	listings := map[string][]byte{}
	for level := range cloudinit.EC2Levels {
		t := &treeBuilder{m: map[string][]byte{}, children: map[string][]string{}, override: override, listings: listings}
		for _, f := range files {
			if cloudinit.EC2Level(f.Since) <= level && !strings.HasSuffix(f.Path, "/") {
				t.leaf(f.Path, f.Data)
			}
		}
		t.build()
		t.m[""] = ec2Root
		trees[level] = t.m
	}
	return trees
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

func (e *ec2Server) versions(w http.ResponseWriter, r *http.Request) {
	serveBytes(w, textPlain, ec2VersionsBody)
}

func (e *ec2Server) serve(w http.ResponseWriter, r *http.Request) {
	h := e.h
	ver, p, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/") // /{ver}/{path...}; ServeMux cleaned it
	level := cloudinit.EC2Level(ver)
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
	trees, _ := ec2Tree.get(h, rec)
	tree := trees[level]
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

// IMDSv2 tokens are stateless: base64url(expiry (8 bytes, big-endian Unix
// seconds) || HMAC-SHA256(key, name 0 uid 0 revision 0 expiry)[:24]). A
// token names the registry.Key it was minted for through the MAC: one
// minted for A does not verify for B, nor for an A deleted and defined
// again (another UID), nor once A's spec changed (another revision; EC2
// clients ask for a new token on a 401). Servers that share the token key
// and a store agree on every part of it (etcd's UIDs are its create
// revisions).
type tokenSigner struct{ key []byte }

func newTokenSigner(key []byte) tokenSigner {
	if len(key) == 0 {
		key = make([]byte, 32)
		rand.Read(key)
	}
	return tokenSigner{key: key}
}

func (t tokenSigner) sum(k registry.Key, exp []byte) []byte {
	m := hmac.New(sha256.New, t.key)
	for _, s := range []string{k.Name, k.UID, k.Revision} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	m.Write(exp)
	return m.Sum(nil)[:24]
}

func (t tokenSigner) mint(k registry.Key, expiry time.Time) string {
	var b [32]byte
	binary.BigEndian.PutUint64(b[:8], uint64(expiry.Unix()))
	copy(b[8:], t.sum(k, b[:8]))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (t tokenSigner) valid(tok string, k registry.Key, now time.Time) bool {
	var b [32]byte
	if base64.RawURLEncoding.DecodedLen(len(tok)) != len(b) {
		return false
	}
	if _, err := base64.RawURLEncoding.Decode(b[:], []byte(tok)); err != nil {
		return false
	}
	if !hmac.Equal(b[8:], t.sum(k, b[:8])) {
		return false
	}
	return now.Unix() < int64(binary.BigEndian.Uint64(b[:8]))
}

// authorize is the dialect's guard, IMDSv2: a token, when sent, must be
// valid for this instance (401 otherwise, as on EC2); without one, the
// request passes unless the instance has imdsv2: required. The token PUT
// itself needs none.
func (e *ec2Server) authorize(r *http.Request, rec *registry.Record) int {
	if r.Method == http.MethodPut {
		return 0
	}
	if tok := r.Header.Get(HeaderToken); tok != "" {
		if !e.tokens.valid(tok, rec.Key(), e.h.opts.Now()) {
			return http.StatusUnauthorized
		}
		return 0
	}
	if ms := rec.Instance().Spec.MetadataServer; ms != nil && ms.IMDSv2 == "required" {
		return http.StatusUnauthorized
	}
	return 0
}

// MaxTokenTTL is the longest IMDSv2 token lifetime, in seconds (6 hours).
const MaxTokenTTL = 21600

func (e *ec2Server) token(w http.ResponseWriter, r *http.Request) {
	h := e.h
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
	ms := rec.Instance().Spec.MetadataServerSettings()
	switch {
	case h.fromTrustedProxy(r) && !h.opts.ProxiesSetHopLimit:
		// The server's socket leads to the proxy: a hop limit there
		// would not keep the token in the guest.
		emptyStatus(w, http.StatusForbidden)
		return
	case h.fromTrustedProxy(r):
		w.Header().Set(HeaderTokenHopLimit, strconv.Itoa(ms.TokenHopLimit))
	default:
		if err := setHopLimit(r, TokenTTL(ms.TokenHopLimit, h.opts.GuestHops)); err != nil && !h.opts.NoHopLimit {
			// Fail closed: a token whose packets could travel further
			// than configured is not issued.
			h.log.Error("IMDSv2: cannot set the hop limit on the connection; serve with mdserver.NewServer or ConnContext", "instance", rec.Name, "error", err)
			emptyStatus(w, http.StatusInternalServerError)
			return
		}
	}
	tok := e.tokens.mint(rec.Key(), h.opts.Now().Add(time.Duration(ttl)*time.Second))
	w.Header().Set(HeaderTokenTTL, strconv.Itoa(ttl))
	serveBytes(w, textPlain, []byte(tok))
}
