# vminit's two commands for a fresh machine are in README.md:
#   go run ./cmd/vminit build examples/ubuntu-server/instance.yaml -o seed.iso
#   make test
# make alone builds the programs into bin/; make test (which installs the
# test tools with apt, as root or through sudo) is never the default.
.PHONY: build test test-tools check unit bench fuzz generate dist image

GO ?= go

# The default: vminit, vminit-server, vminit-controller, vminit-node and
# vminit-cni (./cmd/vminit..., not cmd/internal: the programs' packages
# and the release tool) into bin/, for this machine (make dist builds the
# releases).
build:
	$(GO) build -trimpath -o bin/ ./cmd/vminit...
# The release targets: make dist builds each. make check cross-compiles
# one architecture of each other system with the same flags (our build
# tags are by system, not architecture: a platform break fails check),
# and linux/arm64, which the image needs: a cold target costs about four
# CPU-minutes, so all six would add a quarter of an hour to make test.
# make check CHECK_TARGETS="$(DIST_TARGETS)" builds them all.
DIST_TARGETS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
CHECK_TARGETS ?= linux/arm64 darwin/arm64 windows/amd64

# Pinned: the module proxy answers some @latest look-ups wrongly.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Everything: install the oracle tools and the QEMU test kernel, then run
# every test (unit, golden, real consumers, QEMU boots, fuzz seeds) with
# missing tools treated as failures rather than skips.
test: test-tools check
	VMINIT_REQUIRE_TOOLS=1 $(GO) test -count=1 -timeout 40m ./...

# The static checks Go projects run in CI. Each module of the repository
# (the root and the benchmarks that carry their own go.mod) is checked.
check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	@echo "== generated files (scripts/generate.sh --check)"; ./scripts/generate.sh --check
	@for m in . $$(git ls-files '*/go.mod' | xargs -n1 dirname); do \
	  echo "== $$m: go vet, staticcheck, go mod tidy -diff"; \
	  (cd $$m && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./... && $(GO) mod tidy -diff) || exit 1; \
	done
	@for t in $(CHECK_TARGETS); do \
	  echo "== $$t: go build -trimpath (the release's flags; test helpers and benchmarks are Linux-only)"; \
	  export GOOS=$${t%/*} GOARCH=$${t#*/} CGO_ENABLED=0 GOFLAGS=; \
	  $(GO) build -trimpath $$($(GO) list -f '{{if .GoFiles}}{{.ImportPath}}{{end}}' ./... | grep -v -e /internal/testing/ -e /bench/) || exit 1; \
	done

# Release artefacts into dist/: the binaries of ./cmd/vminit... for every
# target, a .deb per Linux architecture, the OCI image archive
# dist/vminit-image.tar (and its digest), SHA256SUMS (cmd/internal/release).
dist:
	$(GO) run ./cmd/internal/release -out dist -targets "$(DIST_TARGETS)"

# The image (and the Linux binaries and .debs) alone: dist/vminit-image.tar.
image:
	$(GO) run ./cmd/internal/release -out dist -targets "linux/amd64 linux/arm64"

# Every generated file: the CRD and DeepCopy methods derived from kube/api
# (controller-gen, pinned in the script), cloudinit/schema_tree.go from
# cloud-init's schema and cloudbaseinit/windows_zones.go from Debian's
# python3-tzlocal; check fails when one is stale or unmarked.
generate:
	./scripts/generate.sh

test-tools:
	./scripts/install-test-tools.sh

# Unit tests only: tests whose tools are missing skip themselves.
unit:
	$(GO) test ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Run each fuzz target for FUZZTIME (default 60s).
FUZZTIME ?= 60s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list 'Fuzz.*' $$pkg 2>/dev/null | grep ^Fuzz); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done
