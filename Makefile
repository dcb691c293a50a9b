# GNU make. `make` / `make test`: install redis-server if missing, vet, test.
GO ?= go

.PHONY: test vet redis

test: redis vet
	$(GO) test -race -timeout 20m ./...

vet:
	$(GO) vet ./...

# Install redis-server if it is not on PATH (and REDIS_SERVER does not name one).
redis:
	@if command -v redis-server >/dev/null 2>&1 || { [ -n "$$REDIS_SERVER" ] && [ -x "$$REDIS_SERVER" ]; }; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing redis-server with apt-get"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server; \
	elif [ "$$(uname -s)" = Darwin ] && command -v brew >/dev/null 2>&1; then \
		echo "installing redis with brew"; \
		brew install redis; \
	else \
		echo "redis-server not found. Install it: 'apt-get install -y redis-server' (Debian/Ubuntu, as root)" >&2; \
		echo "or 'brew install redis' (macOS), or set REDIS_SERVER=/path/to/redis-server." >&2; \
		exit 1; \
	fi
