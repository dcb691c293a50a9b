# GNU make. `make` / `make test`: install what the tests need if it is missing
# (redis-server; the PostgreSQL server for examples/), vet, test.
#
# go.work makes the root module and examples/ (a module of its own, so that its database
# drivers stay out of the core's go.mod) one workspace. In a workspace, ./... still stops
# at the examples/ module, so both patterns are named.
GO ?= go
PKGS = ./... ./examples/...

.PHONY: test vet deps

test: deps vet
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

vet:
	$(GO) vet $(PKGS)

# Where Debian keeps the PostgreSQL server binaries (off PATH).
PG_GLOB ?= /usr/lib/postgresql/*/bin/initdb

# Install what is missing: redis-server, unless it is on PATH or REDIS_SERVER names one;
# the PostgreSQL server (initdb, postgres), unless PG_BIN names its directory, initdb is on
# PATH or it is under /usr/lib/postgresql.
deps:
	@apt=""; brew=""; \
	if ! command -v redis-server >/dev/null 2>&1 && ! { [ -n "$$REDIS_SERVER" ] && [ -x "$$REDIS_SERVER" ]; }; then \
		apt="redis-server"; brew="redis"; \
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
		echo "PG_BIN=/directory/of/initdb-and-postgres." >&2; \
		exit 1; \
	fi
