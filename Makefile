# vminit's two commands for a fresh machine are in README.md:
#   go run ./cmd/vminit build examples/ubuntu-server/instance.yaml -o seed.iso
#   make test
.PHONY: test test-tools unit bench fuzz

GO ?= go

# Everything: install the oracle tools and the QEMU test kernel, then run
# every test (unit, golden, real consumers, QEMU boots, fuzz seeds) with
# missing tools treated as failures rather than skips.
test: test-tools
	VMINIT_REQUIRE_TOOLS=1 $(GO) test -count=1 -timeout 40m ./...

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
