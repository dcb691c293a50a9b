# GNU make. `make` / `make test`: install what the tests need if it is missing
# (redis-server, redis-sentinel; the PostgreSQL server for examples/), vet, test. `make check`:
# vet and staticcheck over every module, the structure checks, and that every module is tidy
# and builds alone; run it before proposing a change.
#
# go.work makes the root module, the CLI (cmd/dlock), examples/, bench/, the adapters under
# extra/ and the tests against other clients under interop/ (modules of their own, so that
# the CLI's terminal library, their database drivers, the peer libraries, Prometheus and
# OpenTelemetry stay out of the core's go.mod, which is part of every user's module graph)
# one workspace. In a workspace, ./... still stops at those modules, so each is named:
# MODULES lists the directories of go.work's modules, VET_PKGS each with /..., and PKGS
# the same but bench/. `make test` does not run the benchmark suite; vet covers it, so that
# a change to the API it uses shows at once.
GO ?= go
MODULES = $(shell $(GO) list -m -f '{{.Dir}}' | sed 's|^$(CURDIR)|.|')
VET_PKGS = $(addsuffix /...,$(MODULES))
PKGS = $(filter-out ./bench/...,$(VET_PKGS))

# staticcheck 2026.2.2 (module version v0.8.2), which supports Go 1.26. It is installed
# into .bin/ (ignored by git) under its version, so that changing the pin installs anew.
STATICCHECK_VERSION = v0.8.2
STATICCHECK = .bin/staticcheck-$(STATICCHECK_VERSION)/staticcheck

.PHONY: test vet check staticcheck structure modules deps bench faults faults-deps

test: deps vet
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

vet:
	$(GO) vet $(VET_PKGS)

check: vet staticcheck structure modules

# `make modules`: every module is tidy (`go mod tidy -diff` prints nothing) and builds
# outside the workspace (GOWORK=off), as for a user who requires it or for
# `cd cmd/dlock && go install .`: each finds the dlock beside it through a replace
# directive, not through go.work. Fix one with `cd DIR && GOWORK=off go mod tidy`.
modules:
	@status=0; for m in $(MODULES); do \
		(cd $$m && GOWORK=off $(GO) mod tidy -diff && GOWORK=off $(GO) build ./...) || \
			{ echo "module $$m: not tidy, or does not build with GOWORK=off" >&2; status=1; }; \
	done; exit $$status

staticcheck: $(STATICCHECK)
	$(STATICCHECK) $(VET_PKGS)

$(STATICCHECK):
	GOBIN=$(CURDIR)/$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# `make structure`: the repository's checks of its own shape (internal/structure: pairs of
# files that call each other, function length, the root package's size, ARCHITECTURE.md's
# length, paths and "owns" claims), printing the figures of each. `make test` runs them
# with the other packages.
structure:
	$(GO) test -count=1 -v ./internal/structure

# `make bench`: dlock against redsync, bsm/redislock, rueidislock and a bare SET NX loop,
# on redis-server processes it starts itself, the quorum scenarios also behind a delay
# proxy that it starts as a process of its own (about 5 minutes; needs redis-server: `make
# deps`). It rewrites the generated part of BENCHMARKS.md and bench/waits.png; the raw
# results go to bench/results/ (ignored by git). Flags: go run ./bench -h.
BENCH_FLAGS ?=
bench:
	$(GO) run ./bench --md BENCHMARKS.md --plot bench/waits.png --json bench/results/results.json $(BENCH_FLAGS)

# `make faults`: the fault suite (internal/faults). Real redis-servers, proxies and holder
# processes are broken on purpose (paused, killed, restarted, cut off, delayed, a clock
# stepped), and every check is shown to fail once by a mutation; then RELIABILITY.md is
# written from the run (the raw results go to internal/faults/results/, ignored by git).
# About 6 minutes on 2 cores, 3 of them the randomized scenario (random: 3 fresh seeds of
# 30s, and its mutations). It fails, after writing the report, if a scenario found a
# violation or a mutation went unnoticed. DLOCK_FAULTS_ONLY=regexp runs the scenarios and
# mutations whose names match, and writes its report next to the results instead;
# DLOCK_FAULTS_MUTATIONS=0 skips the mutations. DLOCK_FAULTS_SEED=n[,m...] replays seeds
# of the random scenario; DLOCK_FAULTS_RANDOM_DURATION=5m and DLOCK_FAULTS_RANDOM_SEEDS=k
# run it longer (the suite's timeout then grows to FAULTS_TIMEOUT's 3 hours).
FAULTS_RESULTS ?= internal/faults/results
FAULTS_TIMEOUT ?= $(if $(DLOCK_FAULTS_RANDOM_DURATION)$(DLOCK_FAULTS_RANDOM_SEEDS),3h,15m)
faults: faults-deps
	@mkdir -p $(FAULTS_RESULTS) && rm -f $(FAULTS_RESULTS)/results.json
	@out=RELIABILITY.md; [ -z "$$DLOCK_FAULTS_ONLY" ] || out=$(FAULTS_RESULTS)/RELIABILITY.md; \
	status=0; \
	DLOCK_FAULTS=1 DLOCK_FAULTS_JSON=$(CURDIR)/$(FAULTS_RESULTS)/results.json \
		$(GO) test -count=1 -timeout $(FAULTS_TIMEOUT) -run '^TestFaults$$' ./internal/faults || status=$$?; \
	$(GO) run ./internal/faults/cmd/reliability -in $(FAULTS_RESULTS)/results.json -out $$out && \
	echo "wrote $$out" && exit $$status

# What the fault suite needs besides Go: redis-server, and libfaketime (to step one
# server's clock), installed with apt-get (as root) when missing.
FAKETIME_GLOB ?= /usr/lib/*/faketime/libfaketime.so.1
faults-deps:
	@pkgs=""; \
	command -v redis-server >/dev/null 2>&1 || [ -x "$$REDIS_SERVER" ] || pkgs="redis-server"; \
	[ -f "$$FAKETIME_LIB" ] || ls $(FAKETIME_GLOB) >/dev/null 2>&1 || pkgs="$$pkgs libfaketime"; \
	if [ -z "$$pkgs" ]; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing $$pkgs with apt-get"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$pkgs; \
	else \
		echo "missing:$$pkgs. Install: 'apt-get install -y$$pkgs' (Debian/Ubuntu, as root);" >&2; \
		echo "or set REDIS_SERVER=/path/to/redis-server, FAKETIME_LIB=/path/to/libfaketime.so.1." >&2; \
		exit 1; \
	fi

# Where Debian keeps the PostgreSQL server binaries (off PATH).
PG_GLOB ?= /usr/lib/postgresql/*/bin/initdb

# Install what is missing: redis-server and redis-sentinel (Debian packages them apart;
# brew's redis has both), unless each is on PATH or REDIS_SERVER and REDIS_SENTINEL name
# them; the PostgreSQL server (initdb, postgres), unless PG_BIN names its directory,
# initdb is on PATH or it is under /usr/lib/postgresql; tmux, the terminal of dlock top's
# tests; promtool (Debian's and brew's prometheus package), which checks extra/prometheus's
# alert rules and dashboard queries, unless on PATH or named by PROMTOOL.
deps:
	@apt=""; brew=""; \
	if ! command -v redis-server >/dev/null 2>&1 && ! { [ -n "$$REDIS_SERVER" ] && [ -x "$$REDIS_SERVER" ]; }; then \
		apt="redis-server"; brew="redis"; \
	fi; \
	if ! command -v redis-sentinel >/dev/null 2>&1 && ! { [ -n "$$REDIS_SENTINEL" ] && [ -x "$$REDIS_SENTINEL" ]; }; then \
		apt="$$apt redis-sentinel"; brew="redis"; \
	fi; \
	if ! command -v tmux >/dev/null 2>&1; then \
		apt="$$apt tmux"; brew="$$brew tmux"; \
	fi; \
	if ! command -v promtool >/dev/null 2>&1 && ! { [ -n "$$PROMTOOL" ] && [ -x "$$PROMTOOL" ]; }; then \
		apt="$$apt prometheus"; brew="$$brew prometheus"; \
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
		echo "REDIS_SENTINEL=/path/to/redis-sentinel, PG_BIN=/directory/of/initdb-and-postgres," >&2; \
		echo "PROMTOOL=/path/to/promtool." >&2; \
		exit 1; \
	fi
