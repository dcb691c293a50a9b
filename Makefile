# GNU make. `make` / `make test`: install what the tests need if it is missing
# (redis-server, redis-sentinel; the PostgreSQL server for examples/), vet, test. `make check`:
# vet and staticcheck over every module; run it before proposing a change.
#
# go.work makes the root module, examples/ and bench/ (modules of their own, so that their
# database drivers and the peer libraries stay out of the core's go.mod) one workspace. In
# a workspace, ./... still stops at those modules, so each is named: VET_PKGS lists every
# module of go.work. `make test` does not run the benchmark suite; vet covers it, so that
# a change to the API it uses shows at once.
GO ?= go
PKGS = ./... ./examples/...
VET_PKGS = $(shell $(GO) list -m -f '{{.Dir}}/...' | sed 's|^$(CURDIR)|.|')

# staticcheck 2026.2.2 (module version v0.8.2), which supports Go 1.26. It is installed
# into .bin/ (ignored by git) under its version, so that changing the pin installs anew.
STATICCHECK_VERSION = v0.8.2
STATICCHECK = .bin/staticcheck-$(STATICCHECK_VERSION)/staticcheck

.PHONY: test vet check deps bench

test: deps vet
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

vet:
	$(GO) vet $(VET_PKGS)

check: vet $(STATICCHECK)
	$(STATICCHECK) $(VET_PKGS)

$(STATICCHECK):
	GOBIN=$(CURDIR)/$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# `make bench`: dlock against redsync, bsm/redislock, rueidislock and a bare SET NX loop,
# on redis-server processes it starts itself (about 4 minutes; needs redis-server: `make
# deps`). It rewrites the generated part of BENCHMARKS.md and bench/waits.png; the raw
# results go to bench/results/ (ignored by git). Flags: go run ./bench -h.
BENCH_FLAGS ?=
bench:
	$(GO) run ./bench --md BENCHMARKS.md --plot bench/waits.png --json bench/results/results.json $(BENCH_FLAGS)

# Where Debian keeps the PostgreSQL server binaries (off PATH).
PG_GLOB ?= /usr/lib/postgresql/*/bin/initdb

# Install what is missing: redis-server and redis-sentinel (Debian packages them apart;
# brew's redis has both), unless each is on PATH or REDIS_SERVER and REDIS_SENTINEL name
# them; the PostgreSQL server (initdb, postgres), unless PG_BIN names its directory,
# initdb is on PATH or it is under /usr/lib/postgresql.
deps:
	@apt=""; brew=""; \
	if ! command -v redis-server >/dev/null 2>&1 && ! { [ -n "$$REDIS_SERVER" ] && [ -x "$$REDIS_SERVER" ]; }; then \
		apt="redis-server"; brew="redis"; \
	fi; \
	if ! command -v redis-sentinel >/dev/null 2>&1 && ! { [ -n "$$REDIS_SENTINEL" ] && [ -x "$$REDIS_SENTINEL" ]; }; then \
		apt="$$apt redis-sentinel"; brew="redis"; \
	fi; \
	if ! { [ -n "$$PG_BIN" ] && [ -x "$$PG_BIN/initdb" ]; } && ! command -v initdb >/dev/null 2>&1 && \
		! ls $(PG_GLOB) >/dev/null 2>&1; then \
		apt="$$apt postgresql"; brew="$$brew postgresql"; \
	fi; \
	if [ -z "$$apt" ]; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing $$apt with apt-get"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$apt; \
	elif [ "$$(uname -s)" = Darwin ] && command -v brew >/dev/null 2>&1; then \
		echo "installing $$brew with brew"; \
		brew install $$brew; \
	else \
		echo "missing: $$apt. Install: 'apt-get install -y $$apt' (Debian/Ubuntu, as root)" >&2; \
		echo "or 'brew install $$brew' (macOS); or set REDIS_SERVER=/path/to/redis-server," >&2; \
		echo "REDIS_SENTINEL=/path/to/redis-sentinel, PG_BIN=/directory/of/initdb-and-postgres." >&2; \
		exit 1; \
	fi
